"""A write whose completed instant file was lost looks pending; its rows are not read, and the lazy
rollback (the operator's supervisor included) leaves it alone for a human to decide. The LakeTable used
to show nothing of it (Ready, not Degraded): only the writers' logs and `weir table describe`/`check`
did. Now its status lists it (lostWrites), Degraded is True with reason CompletedFileLost and what to do,
and one Warning event says so; the table stays Ready (writes go on). Once the write is completed again
(`weir table repair --run --complete-lost T`), the condition clears."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from lakecore import Table
from lakecore.concurrency import begin_write
from lakecore.layout import base_file_name, write_token
from lakecore.services.repair import repair_lock, run_repair
from lakecore.timeline.store import clear_cache
from lakecore.write.markers import Marker, create_marker
from lakeoperator.reconcile import reconcile_table
from tests.lakeoperator.test_statuses_fit_the_crd_schemas import fits

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def body(location: Path) -> dict:
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable",
            "metadata": {"name": "events", "namespace": "default", "uid": "u1", "generation": 1},
            "spec": {"location": str(location), "recordKey": ["id"], "buckets": 2,
                     "schema": [{"name": "id", "type": "int64", "nullable": False},
                                {"name": "v", "type": "int64"}],
                     "heartbeat": {"intervalSeconds": 0.1, "tolerableMisses": 1}}}


def rows(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids), pa.int64())})


def condition(status: dict, kind: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == kind)


def test_the_table_is_degraded_until_the_write_is_completed_again(tmp_path):
    table = body(tmp_path / "events")
    table["status"] = reconcile_table(table, NOW).status
    t = Table.open(str(tmp_path / "events"))
    t.upsert(rows([1, 2, 3], 1))
    lost = t.upsert(rows([2], 2)).instant.requested_time
    t.upsert(rows([3], 3))
    timeline = tmp_path / "events" / ".weir" / "timeline"
    [name] = [n for n in os.listdir(timeline) if n.startswith(lost + "_")]
    (timeline / name).unlink()
    clear_cache()
    time.sleep(0.5)   # its heartbeat (0.1 s, one miss) has long expired

    out = reconcile_table(table, NOW)
    status = out.status
    fits("laketables", status)
    assert status["phase"] == "Ready" and condition(status, "Ready")["status"] == "True"
    degraded = condition(status, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "CompletedFileLost")
    assert lost in degraded["message"] and "--complete-lost" in degraded["message"]
    assert f"weir table check {tmp_path / 'events'}" in degraded["message"]
    assert status["lostWrites"] == [lost]
    assert [e[:2] for e in out.events] == [("Warning", "CompletedFileLost")]
    table["status"] = status
    assert reconcile_table(table, NOW).events == ()   # said once

    run_repair(t.storage, repair_lock(t.storage), dry_run=False, complete_lost=[lost])
    clear_cache()
    status = reconcile_table(table, NOW).status
    fits("laketables", status)
    assert status.get("lostWrites") is None
    assert (condition(status, "Degraded")["status"], condition(status, "Degraded")["reason"]) \
        == ("False", "AsExpected")
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == \
        [{"id": 1, "v": 1}, {"id": 2, "v": 2}, {"id": 3, "v": 3}]


def test_a_dead_write_that_did_not_complete_is_not_taken_for_one(tmp_path):
    """A write that died after its first data file (its marker made before it) is a failed write, not a
    lost completed one: not reported."""
    table = body(tmp_path / "events")
    table["status"] = reconcile_table(table, NOW).status
    t = Table.open(str(tmp_path / "events"))
    t.upsert(rows([1], 1))
    dead = begin_write(t.storage, t.config, t.lock, "upsert").instant.requested_time  # never beats again
    path = base_file_name("f-dead", write_token(), dead)
    create_marker(t.storage, Marker(dead, path, "create"))
    t.storage.write(path, b"PAR1 half a file")
    time.sleep(0.5)
    clear_cache()
    status = reconcile_table(table, NOW).status
    assert t.timeline().find(dead) is not None   # still pending: the test looks at it, nothing else
    assert status.get("lostWrites") is None and condition(status, "Degraded")["status"] == "False"
