"""A kind cluster for the e2e suite: create it, build and load Weir's images, install the Helm chart,
run an S3 endpoint in it, and talk to it the way a user does (kubectl, helm), with the same methods the
API server tests' `Cluster` has (apply, get, wait_status, events), so both run the same checks
(tests/support/scenario_checks.py).

Needs a Docker engine and `kind` (`make e2e` downloads a pinned kind into the virtualenv); kubectl and
helm are the pinned ones of the other tests (tests/support/kubectl.py), never the machine's. The cluster,
its kubeconfig and the port-forward are the test's own and are removed at the end."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.kubectl import extract_tools

ROOT = Path(__file__).resolve().parents[2]
IMAGE_TAG = "e2e"
OPERATOR_IMAGE = "ghcr.io/weir-dev/weir-operator"
SPARK_IMAGE = "ghcr.io/weir-dev/weir-spark"
NAMESPACE = "lake"              # where the tables and writers live (the chart watches it)
OPERATOR_NAMESPACE = "weir-system"
S3_IN_CLUSTER = f"http://s3.{NAMESPACE}.svc:5000"
S3_KEYS = {"key": "testing", "secret": "testing", "client_kwargs": {"region_name": "us-east-1"}}
PLURALS = {"LakeTable": "laketables.weir.dev", "LakeWriter": "lakewriters.weir.dev",
           "TableService": "tableservices.weir.dev"}


def unavailable() -> str | None:
    """Why the e2e suite cannot run on this machine, or None."""
    if shutil.which("docker") is None:
        return "no docker command"
    try:
        subprocess.run(["docker", "info"], check=True, capture_output=True, timeout=30)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return "no Docker engine answers `docker info`"
    if kind_binary() is None:
        return "no kind binary (`make e2e` downloads one into .venv/bin)"
    return None


def kind_binary() -> str | None:
    local = ROOT / ".venv" / "bin" / "kind"
    return str(local) if local.exists() else shutil.which("kind")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class KindCluster:
    name: str
    work: Path
    kubeconfig: Path = field(init=False)
    tools: Path = field(default_factory=extract_tools)
    s3_port: int = 0
    _forward: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        self.kubeconfig = self.work / "kubeconfig"

    # -- plumbing ------------------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), "HOME": str(self.work)}

    def _run(self, argv: list[str], *, stdin: str | None = None, timeout: float = 600,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                              env=self._env(), cwd=ROOT, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv[:4])} ... exited {done.returncode}:\n{done.stderr[-4000:]}")
        return done

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        return self._run([str(self.tools / "kubectl"), *args], stdin=stdin, check=check).stdout

    def helm(self, *args: str) -> str:
        return self._run([str(self.tools / "helm"), *args]).stdout

    # -- lifecycle -----------------------------------------------------------------------------------
    def create(self) -> None:
        kind = kind_binary()
        assert kind is not None
        self._run([kind, "create", "cluster", "--name", self.name, "--kubeconfig", str(self.kubeconfig),
                   "--config", str(ROOT / "tests" / "e2e" / "kind-config.yaml"), "--wait", "180s"])

    def delete(self) -> None:
        self.stop_port_forward()
        kind = kind_binary()
        if kind is not None:
            self._run([kind, "delete", "cluster", "--name", self.name], check=False)

    def build_and_load_images(self) -> None:
        """Both images from images/*/Dockerfile, built from the working tree and loaded into the nodes."""
        for image, dockerfile in ((OPERATOR_IMAGE, "images/operator/Dockerfile"),
                                  (SPARK_IMAGE, "images/spark/Dockerfile")):
            self._run(["docker", "build", "-t", f"{image}:{IMAGE_TAG}", "-f", dockerfile, "."], timeout=1800)
            kind = kind_binary()
            assert kind is not None
            self._run([kind, "load", "docker-image", f"{image}:{IMAGE_TAG}", "--name", self.name])

    def install_chart(self, *values: str) -> None:
        """`helm install` of charts/weir watching NAMESPACE, with the images just loaded."""
        self.kubectl("create", "namespace", NAMESPACE)
        self.helm("install", "weir", str(ROOT / "charts" / "weir"), "--namespace", OPERATOR_NAMESPACE,
                  "--create-namespace", "--wait", "--timeout", "5m",
                  "--set", f"image.tag={IMAGE_TAG}", "--set", f"spark.image.tag={IMAGE_TAG}",
                  "--set", f"watchNamespaces={{{NAMESPACE}}}", *values)

    def helm_test(self) -> str:
        return self.helm("test", "weir", "--namespace", OPERATOR_NAMESPACE, "--logs")

    def deploy_s3(self, bucket: str = "lake") -> dict[str, Any]:
        """moto in the cluster, a bucket, and the storage Secret tables name; returns the storage
        options that reach it from this machine (through a port-forward)."""
        self.kubectl("apply", "-f", str(ROOT / "tests" / "e2e" / "s3.yaml"))
        self.kubectl("-n", NAMESPACE, "rollout", "status", "deployment/s3", "--timeout=180s")
        in_cluster = {**S3_KEYS, "endpoint_url": S3_IN_CLUSTER}
        self.kubectl("-n", NAMESPACE, "create", "secret", "generic", "lake-storage",
                     f"--from-literal=options.json={json.dumps(in_cluster)}")
        self.s3_port = free_port()
        self._forward = subprocess.Popen(
            [str(self.tools / "kubectl"), "-n", NAMESPACE, "port-forward", "svc/s3", f"{self.s3_port}:5000"],
            env=self._env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: _answers(self.s3_port), timeout=60, what="the S3 port-forward")
        local = {**S3_KEYS, "endpoint_url": f"http://127.0.0.1:{self.s3_port}"}
        import s3fs
        s3fs.S3FileSystem(**local).mkdir(bucket)
        return local

    def stop_port_forward(self) -> None:
        if self._forward is not None:
            self._forward.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._forward.wait(timeout=10)
            self._forward = None

    # -- the Cluster methods the scenarios use -------------------------------------------------------
    def apply(self, body: dict[str, Any]) -> dict[str, Any]:
        body.setdefault("metadata", {}).setdefault("namespace", NAMESPACE)
        applied: dict[str, Any] = json.loads(self.kubectl("apply", "-o", "json", "-f", "-",
                                                          stdin=json.dumps(body)))
        return applied

    def apply_kustomization(self, folder: Path) -> str:
        return self.kubectl("apply", "-k", str(folder))

    def get(self, kind: str, name: str, namespace: str = NAMESPACE) -> dict[str, Any]:
        got: dict[str, Any] = json.loads(self.kubectl("-n", namespace, "get", PLURALS.get(kind, kind), name,
                                                      "-o", "json"))
        return got

    def wait_status(self, kind: str, name: str, predicate: Callable[[dict[str, Any]], bool], *,
                    timeout: float = 300, namespace: str = NAMESPACE) -> dict[str, Any]:
        last: dict[str, Any] = {}

        def probe() -> dict[str, Any] | None:
            nonlocal last
            last = self.get(kind, name, namespace)
            return last if predicate(last.get("status") or {}) else None

        try:
            found: dict[str, Any] = wait_for(probe, timeout=timeout, what=f"{kind} {name}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nstatus: {last.get('status')}\noperator log:\n"
                                 f"{self.operator_log()[-6000:]}") from None
        return found

    def events(self, name: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
        items = json.loads(self.kubectl("-n", namespace, "get", "events", "-o", "json"))["items"]
        return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]

    def operator_log(self) -> str:
        return self.kubectl("-n", OPERATOR_NAMESPACE, "logs", "deployment/weir", "--tail=200", check=False)

    def metrics(self) -> str:
        return self.kubectl("get", "--raw", f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/services/"
                            "weir-metrics:metrics/proxy/metrics")

    # -- holding a write in its driver pod (WEIR_TEST_PAUSE_DIR, made by the task in the pod) -----------
    def driver_pod(self, writer: str) -> str | None:
        pod = (self.get("LakeWriter", writer).get("status") or {}).get("driverPod")
        return str(pod) if pod else None

    def reached(self, writer: str, pause_dir: str) -> list[str]:
        pod = self.driver_pod(writer)
        if pod is None:
            return []
        listing = self.kubectl("-n", NAMESPACE, "exec", pod, "--", "ls", pause_dir, check=False)
        return [n.removeprefix("reached-") for n in listing.split() if n.startswith("reached-")]

    def release(self, writer: str, pause_dir: str) -> None:
        pod = self.driver_pod(writer)
        assert pod is not None, f"{writer} has no driver pod to release"
        self.kubectl("-n", NAMESPACE, "exec", pod, "--", "rm", "-f", f"{pause_dir}/hold")


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def wait_for(probe: Callable[[], Any], *, timeout: float, what: str, every: float = 2.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@contextlib.contextmanager
def kind_cluster(work: Path) -> Iterator[KindCluster]:
    cluster = KindCluster(f"weir-e2e-{os.getpid()}", work)
    cluster.create()
    try:
        yield cluster
    finally:
        cluster.delete()
