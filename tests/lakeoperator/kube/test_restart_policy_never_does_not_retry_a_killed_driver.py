"""restartPolicy Never through the real operator: a writer whose driver is killed is Failed after its one
attempt, though the cause (infrastructure) would otherwise be retried; its pod stays for its logs."""

from __future__ import annotations

import pytest

from tests.lakeoperator.kube.manifests import batch_writer, table, write_input
from tests.support.operator import Cluster

pytestmark = [pytest.mark.k8s, pytest.mark.spark]


def test_restart_policy_never_fails_a_killed_driver_without_a_retry(cluster: Cluster) -> None:
    write_input(cluster.work)
    cluster.apply(table(cluster.work))
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)
    cluster.apply(batch_writer(cluster.work, "once", restartPolicy={"type": "Never"}))
    once = cluster.wait_status("LakeWriter", "once", lambda s: s.get("phase") == "Running", timeout=60)
    cluster.kill_driver(once["status"]["submissionId"])
    failed = cluster.wait_status("LakeWriter", "once", lambda s: s.get("phase") == "Failed", timeout=60)
    status = failed["status"]
    assert [(h["submissionId"], h["cause"]) for h in status["history"]] == [
        (once["status"]["submissionId"], "infrastructure")]
    assert status["attempts"]["total"] == 1
    assert "restartPolicy Never" in str(status["conditions"])
    assert [p["metadata"]["name"] for p in cluster.pods(selector="weir.dev/writer=once")] == [
        once["status"]["submissionId"]]
