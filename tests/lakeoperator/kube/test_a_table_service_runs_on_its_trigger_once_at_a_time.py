"""A TableService under the real operator, its run a real Spark job run by the process kubelet: a
compaction with `trigger: afterDeltaCommits: 2` starts nothing after one delta commit, runs once after
the second (status.lastRun success with the compaction's instant, read from the job's termination
message, a completed compaction on the timeline, the rows unchanged), then
waits for two more; suspended, it starts nothing however many commits come; resumed, it runs on the
commits that came meanwhile; deleting it removes its run's pod."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest

from lakecore import Table
from tests.lakeoperator.kube.manifests import table
from tests.support.operator import Cluster

pytestmark = [pytest.mark.k8s, pytest.mark.spark]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.int64()), ("ts", pa.int64())])


def service(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"tableRef": {"name": "orders"}, "type": "compaction",
                            "trigger": {"afterDeltaCommits": 2},
                            "spark": {"mode": "local", "localCores": 1, "driver": {"memory": "512m"}}}
    base.update(spec)
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "TableService", "metadata": {"name": "orders-compact"},
            "spec": base}


def upsert(cluster: Cluster, ids: range, ts: int) -> None:
    rows = [{"id": i, "amount": i * ts, "ts": ts} for i in ids]
    Table.open(str(cluster.work / "lake" / "orders")).upsert(pa.Table.from_pylist(rows, schema=SCHEMA))


def compaction_times(cluster: Cluster) -> list[str]:
    timeline = Table.open(str(cluster.work / "lake" / "orders")).timeline()
    return [i.requested_time for i in timeline.completed if i.action == "compaction"]


def compactions(cluster: Cluster) -> int:
    return len(compaction_times(cluster))


def test_a_compaction_runs_once_per_two_delta_commits_and_not_while_suspended(cluster: Cluster) -> None:
    cluster.apply(table(cluster.work, tableType="merge_on_read"))
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)
    cluster.apply(service())
    upsert(cluster, range(10), ts=1)
    time.sleep(2)   # one delta commit: below the trigger, nothing starts
    assert not (cluster.get("TableService", "orders-compact").get("status") or {}).get("activeRun")
    assert cluster.pods(selector="weir.dev/service=orders-compact") == []

    upsert(cluster, range(5, 15), ts=2)
    done = cluster.wait_status("TableService", "orders-compact",
                               lambda s: (s.get("lastRun") or {}).get("outcome") == "success", timeout=180)
    assert len(done["status"]["history"]) == 1 and not done["status"].get("activeRun")
    assert compactions(cluster) == 1
    # the run's instant, from the job's termination message
    assert done["status"]["lastRun"]["instant"] == compaction_times(cluster)[0]
    rows = Table.open(str(cluster.work / "lake" / "orders")).read().sort_by("id").to_pylist()
    ts = [1] * 5 + [2] * 10
    assert rows == [{"id": i, "amount": i * ts[i], "ts": ts[i]} for i in range(15)]
    assert "RunStarted" in [e["reason"] for e in cluster.events("orders-compact")]

    cluster.patch("TableService", "orders-compact", {"spec": {"suspend": True}})
    cluster.wait_status("TableService", "orders-compact",
                        lambda s: any(c["type"] == "Ready" and c["reason"] == "Suspended"
                                      for c in s.get("conditions") or ()), timeout=30)
    upsert(cluster, range(3), ts=3)
    upsert(cluster, range(3), ts=4)
    time.sleep(3)   # two commits: the trigger would fire now, but the service is suspended
    status = cluster.get("TableService", "orders-compact")["status"]
    assert not status.get("activeRun") and len(status["history"]) == 1
    assert compactions(cluster) == 1

    cluster.patch("TableService", "orders-compact", {"spec": {"suspend": False}})   # resumed: the two run
    resumed = cluster.wait_status("TableService", "orders-compact",
                                  lambda s: len(s.get("history") or ()) == 2 and not s.get("activeRun"),
                                  timeout=180)
    assert [r["outcome"] for r in resumed["status"]["history"]] == ["success", "success"]
    assert compactions(cluster) == 2
    assert [r["instant"] for r in resumed["status"]["history"]] == compaction_times(cluster)

    cluster.delete("TableService", "orders-compact")
    deadline = time.monotonic() + 30
    while cluster.pods(selector="weir.dev/service=orders-compact"):
        assert time.monotonic() < deadline, "the deleted service's run pod is still there"
        time.sleep(0.2)
    assert "Traceback" not in cluster.operator.log()
