"""An operator killed mid-flight (SIGKILL) and started again never submits a writer twice.

Forced interleaving: the API server refuses pod creation (a 503 injected by a proxy in front of the real
server, tests/support/kube_faults.py), so every writer's submission id is in its status while no driver
pod exists — the window between the two steps of a submission — and the operator is killed there.
Started again with the API healthy, it creates each writer's pod under
the recorded submission's name: no second submission, one pod per writer. Then 30 more writers, the
operator killed at an arbitrary point while it submits them and started again: still one pod per
writer, each named after the writer's only submission."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.builders.driver_pod import child_name
from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.kube_client import KubeClient, resource_path
from tests.support.kube_faults import FaultProxy
from tests.support.kube_server import ControlPlane
from tests.support.operator import CRDS, OperatorProcess, wait_until, weir_path

pytestmark = [pytest.mark.k8s, pytest.mark.crash]


def writers(client: KubeClient, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get(weir_path("LakeWriter", namespace=ns))["items"]
    return items


def submission_ids(client: KubeClient, ns: str) -> dict[str, str | None]:
    return {w["metadata"]["name"]: (w.get("status") or {}).get("submissionId") for w in writers(client, ns)}


def pods(client: KubeClient, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get(resource_path("v1", "pods", ns))["items"]
    return items


def one_pod_per_writer(client: KubeClient, ns: str, count: int) -> None:
    wait_until(lambda: len(pods(client, ns)) >= count
               and all((w.get("status") or {}).get("driverPod") for w in writers(client, ns)))
    time.sleep(1)   # a duplicate, were one coming, has had its chance
    found = pods(client, ns)
    by_writer: dict[str, list[str]] = {}
    for pod in found:
        by_writer.setdefault(pod["metadata"]["labels"]["weir.dev/writer"], []).append(pod["metadata"]["name"])
    for w in writers(client, ns):
        status = w["status"]
        assert by_writer.get(w["metadata"]["name"]) == [child_name(status["submissionId"])], (w, by_writer)
        assert status["attempts"]["total"] == 1, status
    assert len(found) == count


def test_an_operator_restart_never_submits_twice(kube_server: ControlPlane, kube_namespace: str,
                                                  tmp_path: Path) -> None:
    kube_server.apply_crds(*CRDS)
    client, ns = kube_server.client(), kube_namespace
    with FaultProxy(kube_server) as proxy:
        operator = OperatorProcess(kube_server, tmp_path, namespaces=(ns,),
                                   kubeconfig=proxy.write_kubeconfig(tmp_path / "via-proxy", ns))
        operator.start()
        try:
            client.create(weir_path("LakeTable", namespace=ns), table(tmp_path))
            wait_until(lambda: (client.get(weir_path("LakeTable", "orders", ns)).get("status") or {})
                       .get("phase") == "Ready")
            proxy.faults[("POST", "pods")] = (503, "ServiceUnavailable", "pods cannot be created now")
            for i in range(5):
                client.create(weir_path("LakeWriter", namespace=ns), batch_writer(tmp_path, name=f"w{i}"))
            recorded = wait_until(lambda: (ids := submission_ids(client, ns)) and all(ids.values()) and ids)
            wait_until(lambda: proxy.refused >= 5)   # every writer's pod was refused at least once
            operator.kill()
            assert pods(client, ns) == []   # killed inside the window: ids recorded, no pod
            proxy.faults.clear()
            operator.start()
            one_pod_per_writer(client, ns, 5)
            assert submission_ids(client, ns) == recorded

            for i in range(5, 35):
                client.create(weir_path("LakeWriter", namespace=ns), batch_writer(tmp_path, name=f"w{i}"))
            wait_until(lambda: len(pods(client, ns)) >= 12)
            operator.kill()
            operator.start()
            one_pod_per_writer(client, ns, 35)
        finally:
            operator.stop()
    assert "Traceback" not in operator.log()
