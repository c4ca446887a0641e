"""The chart installed for real: `helm install` (our pinned helm, server-side apply) on a real API server,
and the operator run the way the installed Deployment says, as the chart's ServiceAccount.

Owns a release's life (install with values, read back what the server holds, uninstall) and turning the
installed Deployment into an operator process: its container's environment (the chart's WEIR_* settings,
fieldRefs resolved as a kubelet would for a pod of that Deployment) and a kubeconfig carrying a token
from the TokenRequest API for the pod template's ServiceAccount: the operator has exactly the chart's
RBAC, never the admin's. What a pod's image would give (the jobs directory, the API server address for
drivers, free ports) is this checkout's. There is no deployment controller: the Deployment makes no pods.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.charts.chart import CHART_DIR
from tests.support.kube_server import ControlPlane
from tests.support.operator import OperatorProcess


@dataclass(frozen=True)
class Release:
    """One installed release: its name and namespace, and the admin's kubeconfig helm used."""

    server: ControlPlane
    helm: Path
    kubeconfig: Path
    name: str
    namespace: str

    def helm_run(self, *args: str, values: dict[str, Any] | None = None) -> str:
        argv = [str(self.helm), *args, "--namespace", self.namespace, "--kubeconfig", str(self.kubeconfig)]
        if values is not None:
            argv += ["--values", "-"]
        homes = {f"HELM_{kind.upper()}_HOME": str(self.kubeconfig.parent / f"helm-{kind}")
                 for kind in ("cache", "config", "data")}   # nothing from or into the user's helm
        done = subprocess.run(argv, input=json.dumps(values) if values is not None else None,
                              capture_output=True, text=True, timeout=180, check=False,
                              env={**os.environ, **homes})
        assert done.returncode == 0, f"helm {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
        return done.stdout

    def deployment(self) -> dict[str, Any]:
        """The operator's Deployment as the server holds it."""
        found: list[dict[str, Any]] = self.server.client().get(
            f"/apis/apps/v1/namespaces/{self.namespace}/deployments",
            labelSelector=f"app.kubernetes.io/instance={self.name}")["items"]
        assert len(found) == 1, [d["metadata"]["name"] for d in found]
        return found[0]

    def service_account(self) -> str:
        name: str = self.deployment()["spec"]["template"]["spec"]["serviceAccountName"]
        return name

    def operator_token(self) -> str:
        """A TokenRequest token for the operator's ServiceAccount (what its pod would mount)."""
        return self.server.token(self.namespace, self.service_account())

    def operator(self, work: Path, identity: str, token: str) -> OperatorProcess:
        """The operator as a pod of the Deployment named `identity` would run, with `token`."""
        work.mkdir(parents=True, exist_ok=True)
        kubeconfig = self.server.write_kubeconfig(work / "kubeconfig", namespace=self.namespace, token=token)
        return OperatorProcess(self.server, work, namespaces=(), kubeconfig=kubeconfig,
                               env=container_env(self.deployment(), pod_name=identity))


def container_env(deployment: dict[str, Any], *, pod_name: str) -> dict[str, str]:
    """The operator container's environment: literal values, and the fieldRefs the chart uses resolved
    for a pod `pod_name` of `deployment` (its namespace, its name)."""
    pod = {"metadata.name": pod_name, "metadata.namespace": deployment["metadata"]["namespace"]}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env: dict[str, str] = {}
    for entry in container.get("env") or []:
        if "value" in entry:
            env[entry["name"]] = str(entry["value"])
        else:
            field = entry["valueFrom"]["fieldRef"]["fieldPath"]
            assert field in pod, f"the chart's env {entry['name']} uses {field}; resolve it here"
            env[entry["name"]] = pod[field]
    return env


@contextmanager
def installed(server: ControlPlane, helm: Path, work: Path, values: dict[str, Any], *,
              name: str = "lakes", namespace: str = "weir-system") -> Iterator[Release]:
    """`helm install` of the chart with `values` (its namespace created), uninstalled afterwards (the
    CRDs stay: the chart keeps them)."""
    work.mkdir(parents=True, exist_ok=True)
    release = Release(server, helm, server.write_kubeconfig(work / "admin.kubeconfig"), name, namespace)
    release.helm_run("install", name, str(CHART_DIR), "--create-namespace", values=values)
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for plural in ("laketables", "lakewriters", "tableservices"):   # served before anything is applied
        server.client().wait_for(f"{crds}/{plural}.weir.dev", lambda crd: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in (crd.get("status") or {}).get("conditions") or []))
    try:
        yield release
    finally:
        release.helm_run("uninstall", name)
