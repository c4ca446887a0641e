"""An operator killed mid-flight (SIGKILL) and started again never submits a writer twice.

Forced interleaving: the API server refuses pod creation (an injected 503), so every writer's submission
id is in its status while no driver pod exists — the window between the two steps of a submission — and
the operator is killed there. Started again with the API healthy, it creates each writer's pod under
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
from tests.support.kube_api import KubeApi, KubeClient, resource_path
from tests.support.operator import ROOT, OperatorProcess, wait_until, weir_path

pytestmark = [pytest.mark.k8s, pytest.mark.crash]
PODS = resource_path("v1", "pods", "default")


def writers(client: KubeClient) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get(weir_path("LakeWriter"))["items"]
    return items


def submission_ids(client: KubeClient) -> dict[str, str | None]:
    return {w["metadata"]["name"]: (w.get("status") or {}).get("submissionId") for w in writers(client)}



def one_pod_per_writer(client: KubeClient, count: int) -> None:
    wait_until(lambda: len(client.get(PODS)["items"]) >= count
               and all((w.get("status") or {}).get("driverPod") for w in writers(client)))
    time.sleep(1)   # a duplicate, were one coming, has had its chance
    pods = client.get(PODS)["items"]
    by_writer: dict[str, list[str]] = {}
    for pod in pods:
        by_writer.setdefault(pod["metadata"]["labels"]["weir.dev/writer"], []).append(pod["metadata"]["name"])
    for w in writers(client):
        status = w["status"]
        assert by_writer.get(w["metadata"]["name"]) == [child_name(status["submissionId"])], (w, by_writer)
        assert status["attempts"]["total"] == 1, status
    assert len(pods) == count


def test_an_operator_restart_never_submits_twice(kube_api: KubeApi, tmp_path: Path) -> None:
    kube_api.apply_crds(*sorted((ROOT / "crds").glob("weir.dev_*.yaml")))
    client = kube_api.client()
    operator = OperatorProcess(kube_api, tmp_path)
    operator.start()
    try:
        client.create(weir_path("LakeTable"), table(tmp_path))
        wait_until(lambda: (client.get(weir_path("LakeTable", "orders")).get("status") or {}).get("phase")
                   == "Ready")
        kube_api.handler.faults[("POST", "pods")] = (503, "ServiceUnavailable", "pods cannot be created now")
        for i in range(5):
            client.create(weir_path("LakeWriter"), batch_writer(tmp_path, name=f"w{i}"))
        recorded = wait_until(lambda: (ids := submission_ids(client)) and all(ids.values()) and ids)
        operator.kill()
        assert client.get(PODS)["items"] == []   # killed inside the window: ids recorded, no pod
        kube_api.handler.faults.clear()
        operator.start()
        one_pod_per_writer(client, 5)
        assert submission_ids(client) == recorded

        for i in range(5, 35):
            client.create(weir_path("LakeWriter"), batch_writer(tmp_path, name=f"w{i}"))
        wait_until(lambda: len(client.get(PODS)["items"]) >= 12)
        operator.kill()
        operator.start()
        one_pod_per_writer(client, 35)
    finally:
        operator.stop()
    assert "Traceback" not in operator.log()
