"""One streaming LakeWriter's life under the real operator, its driver a real Spark job run by the process
kubelet: a killed driver is an infrastructure failure, retried after the backoff under a new submission;
an in-place change (restart policy) keeps the driver; a restartNonce change replaces it; suspending
deletes it and resuming submits a new one; deleting the writer removes its pod (the
controller-manager's garbage collector, through its ownerReference). Through all of it the
rows that arrived are in the table, and every submission had exactly one pod."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from lakecore import Table
from tests.lakeoperator.kube.manifests import streaming_writer, table, write_json_input
from tests.support.operator import Cluster

pytestmark = [pytest.mark.k8s, pytest.mark.spark, pytest.mark.slow]
NAME = "orders-stream"


def running(cluster: Cluster, not_submission: str | None = None) -> dict[str, Any]:
    """The writer once a driver (another than `not_submission`) runs and is ready."""
    return cluster.wait_status("LakeWriter", NAME, lambda s: s.get("phase") == "Running"
                               and s.get("submissionId") != not_submission, timeout=180)


def table_rows(cluster: Cluster, expected: int, timeout: float = 90) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        rows = Table.open(str(cluster.work / "lake" / "orders")).read().sort_by("id").to_pylist()
        if len(rows) >= expected or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def test_a_streaming_writer_is_restarted_suspended_and_resumed(cluster: Cluster) -> None:
    first_rows = write_json_input(cluster.work, "stream", range(5), ts=1)
    cluster.apply(table(cluster.work))
    cluster.apply(streaming_writer(cluster.work))
    first = running(cluster)["status"]
    assert table_rows(cluster, 5) == first_rows

    # a killed driver: infrastructure, backoff (initialSeconds 1: not sooner), a new submission
    killed_at = time.monotonic()
    cluster.kill_driver(first["driverPod"])
    second = running(cluster, not_submission=first["submissionId"])["status"]
    assert time.monotonic() - killed_at >= 1, "the killed driver was restarted before its backoff ended"
    ended = second["history"][-1]
    assert (ended["submissionId"], ended["cause"]) == (first["submissionId"], "infrastructure")
    assert second["attempts"]["total"] == 2 and second["attempts"]["infraFailures"] == 1
    more = write_json_input(cluster.work, "stream", range(5, 8), ts=2)
    assert table_rows(cluster, 8) == first_rows + more   # the new driver resumes from its checkpoint

    # an in-place change: same driver, the applied spec follows
    cluster.patch("LakeWriter", NAME, {"spec": {"restartPolicy": {"maxRestarts": 7}}})
    kept = cluster.wait_status("LakeWriter", NAME, lambda s: json.loads(s.get("appliedSpec") or "{}").get(
        "restartPolicy", {}).get("maxRestarts") == 7, timeout=30)["status"]
    assert kept["submissionId"] == second["submissionId"] and kept["phase"] == "Running"

    # restartNonce: the driver is replaced
    cluster.patch("LakeWriter", NAME, {"spec": {"restartNonce": "1"}})
    third = running(cluster, not_submission=second["submissionId"])["status"]
    assert third["attempts"]["total"] == 3

    # suspend: no driver; resume: a new one
    cluster.patch("LakeWriter", NAME, {"spec": {"state": "Suspended"}})
    cluster.wait_status("LakeWriter", NAME, lambda s: s.get("phase") == "Suspended", timeout=60)
    deadline = time.monotonic() + 30
    while cluster.pods(selector=f"weir.dev/writer={NAME},weir.dev/submission-id={third['submissionId']}"):
        assert time.monotonic() < deadline, "the suspended writer's driver pod was not deleted"
        time.sleep(0.2)
    cluster.patch("LakeWriter", NAME, {"spec": {"state": "Running"}})
    fourth = running(cluster, not_submission=third["submissionId"])["status"]
    assert fourth["attempts"]["total"] == 4

    # four submissions, one pod each; history holds the attempts that ended by themselves (the killed
    # one), the replaced ones are in Events
    submissions = {s["submissionId"] for s in (first, second, third, fourth)}
    assert len(submissions) == 4
    assert [h["submissionId"] for h in fourth["history"]] == [first["submissionId"]]
    assert [p["metadata"]["name"] for p in cluster.pods(selector=f"weir.dev/writer={NAME}")] == \
        [fourth["driverPod"]]
    reasons = cluster.event_reasons(NAME, lambda r: r.count("Submitted") >= 4)
    assert reasons.count("Submitted") == 4, reasons
    assert {"SpecChanged", "Suspending", "Resuming"} <= set(reasons), reasons
    metrics = cluster.operator.metrics()
    restarts = ('weir_restarts_total{cause="infrastructure",kind="LakeWriter",'
                f'namespace="{cluster.namespace}",table="orders"}}')
    assert f"{restarts} 1.0" in metrics, metrics

    # deleting the writer removes its driver (owned by it: the controller-manager's garbage collector
    # deletes it, the kubelet stops it) and nothing is recreated
    cluster.delete("LakeWriter", NAME)
    deadline = time.monotonic() + 30
    while cluster.pods(selector=f"weir.dev/writer={NAME}"):
        assert time.monotonic() < deadline, "the deleted writer's driver pod is still there"
        time.sleep(0.2)
    time.sleep(2)   # a reconcile that would recreate something has had its chance
    assert cluster.pods(selector=f"weir.dev/writer={NAME}") == []
    assert "Traceback" not in cluster.operator.log()
