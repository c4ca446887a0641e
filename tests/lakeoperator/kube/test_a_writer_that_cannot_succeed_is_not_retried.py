"""Failures the restart policy does not retry, through the real operator: a batch writer whose input is
wrong (a null ordering field: the job exits 2, bad input) is Failed after one attempt, and a writer with
restartPolicy Never whose driver is killed is Failed though the cause is infrastructure."""

from __future__ import annotations

import signal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.operator import Cluster

pytestmark = [pytest.mark.k8s, pytest.mark.spark]


def test_bad_input_and_restart_policy_never_fail_without_a_retry(cluster: Cluster) -> None:
    bad = cluster.work / "input" / "bad"
    bad.mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "amount": pa.array([10, 20], pa.int64()),
                             "ts": pa.array([None, None], pa.int64())}), bad / "part-0.parquet")
    cluster.apply(table(cluster.work))
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)
    cluster.apply(batch_writer(cluster.work, "bad-load", source="bad"))
    cluster.apply(batch_writer(cluster.work, "once", source="bad", restartPolicy={"type": "Never"}))

    once = cluster.wait_status("LakeWriter", "once", lambda s: s.get("phase") == "Running", timeout=60)
    cluster.kubelet.pods[("default", once["status"]["submissionId"])].process.send_signal(signal.SIGKILL)
    failed = cluster.wait_status("LakeWriter", "once", lambda s: s.get("phase") == "Failed", timeout=60)
    status = failed["status"]
    assert [h["cause"] for h in status["history"]] == ["infrastructure"]
    assert status["attempts"]["total"] == 1
    assert "restartPolicy Never" in str(status["conditions"])

    failed = cluster.wait_status("LakeWriter", "bad-load", lambda s: s.get("phase") == "Failed", timeout=180)
    status = failed["status"]
    assert [(h["cause"], h["exitCode"]) for h in status["history"]] == [("badInput", 2)]
    assert status["attempts"]["total"] == 1
    assert "BadInput" in str(status["conditions"])
    assert len(cluster.pods(selector="weir.dev/writer=bad-load")) == 1
    assert len(cluster.pods(selector="weir.dev/writer=once")) == 1
