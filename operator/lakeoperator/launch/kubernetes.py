"""The Kubernetes launcher: driver pods created, read and deleted through the API server (kube.py).

The pod a builder made is created as it is; the kubelet runs it and reports its phase and exit code in
the pod's status, which `get_pod` returns as the API serves it. Idempotence comes from the API: a
create of a name that exists is success (the name is the submission id), a delete of a missing pod too.
"""

from __future__ import annotations

from typing import Any

from lakeoperator.kube import Kube


class KubernetesLauncher:
    closed = False   # the cluster runs pods whatever the operator process does

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def create_pod(self, pod: dict[str, Any]) -> None:
        self.kube.create_pod(pod)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.kube.get_pod(namespace, name)

    def delete_pod(self, namespace: str, name: str) -> None:
        self.kube.delete_pod(namespace, name)
