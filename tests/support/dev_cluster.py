"""The tests' Kubernetes, by hand: the real control plane (etcd, kube-apiserver, kube-controller-manager
built by `make controlplane`) with Weir's CRDs, the process kubelet running pods as local processes, and
optionally the operator, until Ctrl-C. For trying manifests with kubectl and Helm the way the kube tests
do, without a cluster or Docker:

    PYTHONPATH=.:operator .venv/bin/python -m tests.support.dev_cluster [--dir DIR] [--operator]

It prints the `export KUBECONFIG=...` line and the pinned kubectl to use (never a kubectl already on
the machine), and `ready` once everything answers. Everything it started is stopped by pid at Ctrl-C
(or SIGTERM); DIR (a temp dir unless given) keeps the logs, the pods' working directory and the
kubeconfig. Pods run in DIR/pods: a LakeTable's relative location is refused on a cluster, so name
tables by absolute paths.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path

from tests.support.kube_server import ControlPlane, controlplane_missing_reason
from tests.support.kubectl import ToolsMissing, extract_tools
from tests.support.kubelet import ProcessKubelet
from tests.support.operator import CRDS, ROOT, OperatorProcess, pod_environment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.dev_cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path,
                        help="where logs, pods and the kubeconfig go (default: a temp dir)")
    parser.add_argument("--namespace", default="default",
                        help="the kubeconfig's namespace (default: default)")
    parser.add_argument("--operator", action="store_true", help="also run the operator (python -m "
                        "lakeoperator), watching every namespace; its log is DIR/operator.log")
    args = parser.parse_args(argv)
    missing = controlplane_missing_reason()
    if missing:
        print(f"cannot start the control plane: {missing}; run `make controlplane` first", file=sys.stderr)
        return 1
    try:
        kubectl = extract_tools() / "kubectl"
    except ToolsMissing as exc:
        print(f"cannot find the pinned kubectl: {exc}; run `make deps` first", file=sys.stderr)
        return 1
    work = (args.dir or Path(tempfile.mkdtemp(prefix="weir-dev-cluster-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with ControlPlane(work / "controlplane") as server:
        server.apply_crds(*CRDS)
        if args.namespace != "default":
            server.client().create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                          "metadata": {"name": args.namespace}})
        kubeconfig = server.write_kubeconfig(work / "kubeconfig", namespace=args.namespace)
        (work / "pods").mkdir(exist_ok=True)
        with ProcessKubelet(server, work / "pod-logs", cwd=work / "pods", environment=pod_environment(),
                            python_path=[ROOT, ROOT / "operator"]):
            operator = OperatorProcess(server, work, namespaces=(), kubeconfig=kubeconfig).start() \
                if args.operator else None
            try:
                print(f"API server {server.url}; files in {work}")
                print(f"export KUBECONFIG={kubeconfig}")
                print(f"kubectl: {kubectl}  (e.g. {kubectl} apply -f examples/...)")
                if operator is not None:
                    print(f"operator: pid {operator.process.pid if operator.process else '?'}, log "
                          f"{operator.log_path}")
                else:
                    print("operator: not started (--operator starts it; or run: PYTHONPATH=.:operator "
                          f"{sys.executable} -m lakeoperator --kubeconfig {kubeconfig} --api-server "
                          f"{server.url} --jobs-dir {ROOT / 'sparkjobs'})")
                print("ready (Ctrl-C stops everything)", flush=True)
                stop.wait()
            finally:
                if operator is not None:
                    operator.stop()
    print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
