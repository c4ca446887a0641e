"""`weir table describe` says what goes on at a table now, from its storage: who holds the storage lock
(and whether that process is gone), each pending write with its writer's last sign of life, each pending
service with the run that holds it, and a live archival run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app
from lakecore.concurrency import begin_write
from lakecore.concurrency.liveness.heartbeat import Heartbeat, HeartbeatConfig, mark_aborted
from lakecore.concurrency.liveness.runs import ARCHIVAL, ServiceRun
from lakecore.services import schedule_compaction
from lakecore.table import AfterCommitOptions, WriterOptions
from lakecore.timeline import now_ms
from tests.lakecore.concurrency.locks.test_lock_contract import REPO_ROOT


def describe(uri: str) -> tuple[dict[str, Any], str]:
    runner = CliRunner()
    as_json = runner.invoke(app, ["table", "describe", uri, "--json"])
    text = runner.invoke(app, ["table", "describe", uri])
    assert as_json.exit_code == 0 and text.exit_code == 0, (as_json.output, text.output)
    return json.loads(as_json.output)["activity"], " ".join(text.output.split())


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([1] * len(ids), pa.int64())})


def test_describe_names_the_lock_holder_the_pending_instants_and_the_runs(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    Table.create(uri, schema=rows([]).schema, record_key="id", ordering_field="ts",
                 table_type="merge_on_read", buckets=1)
    # keeps the dead write
    keep_dead = WriterOptions(after_commit=AfterCommitOptions(clean_failed_writes=False))
    table = Table.open(uri, options=keep_dead)
    now, text = describe(uri)
    assert now == {"lock": {"provider": "storage", "state": "free"}, "pending": [], "running": []}
    assert "lock storage, free" in text

    # a write whose writer died 10 minutes ago without a beat (instant times only grow: drawn first)
    dead = begin_write(table.storage, table.config, table.lock, "upsert", clock=lambda: now_ms() - 600_000)
    table.upsert(rows([1, 2]))

    holder = subprocess.Popen(
        [sys.executable, "-m", "tests.lakecore.concurrency.locks.lock_worker", "hold",
         json.dumps({"provider": "storage", "expiry_s": 600}), uri],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        now, text = describe(uri)
        lock = now["lock"]
        assert lock["state"] == "held" and f":{holder.pid}:" in lock["holder"]
        assert lock["lease_s"] == 600 and lock["holder_gone"] is False
        assert f"held by {lock['holder']} (lease 600 s)" in text
    finally:
        holder.kill()
        holder.communicate()
    now, text = describe(uri)
    assert now["lock"]["holder_gone"] is True and "its process is gone" in text

    # beside the dead write: a live one, an aborted one, a compaction nobody runs, and an archival run
    # of this process
    live = begin_write(table.storage, table.config, table.lock, "upsert")
    beat = Heartbeat(table.storage, live.instant.requested_time, HeartbeatConfig()).start()
    aborted = begin_write(table.storage, table.config, table.lock, "upsert")
    mark_aborted(table.storage, aborted.instant.requested_time, "a test", now_ms())
    plan = schedule_compaction(table.storage, table.config, table.lock)
    assert plan is not None
    with table.lock:
        run = ServiceRun.claim(table.storage, table.lock, ARCHIVAL, "archival", HeartbeatConfig())
    try:
        now, text = describe(uri)
    finally:
        run.release()
        beat.stop()

    pending = {p["instant"]: p for p in now["pending"]}
    assert set(pending) == {live.instant.requested_time, dead.instant.requested_time,
                            aborted.instant.requested_time, plan.instant_time}
    assert pending[live.instant.requested_time] | {"last_sign_of_life_s_ago": 0} == {
        "instant": live.instant.requested_time, "action": "deltacommit", "state": "inflight", "kind": "write",
        "last_sign_of_life_s_ago": 0, "aborted": False, "completed_file_lost": False, "alive": True}
    assert pending[live.instant.requested_time]["last_sign_of_life_s_ago"] < 60
    assert pending[dead.instant.requested_time]["alive"] is False
    assert pending[dead.instant.requested_time]["last_sign_of_life_s_ago"] >= 600
    assert pending[aborted.instant.requested_time]["aborted"] is True
    assert pending[aborted.instant.requested_time]["alive"] is False
    waiting = {"instant": plan.instant_time, "action": "compaction", "state": "requested", "kind": "service",
               "run": None, "alive": False}
    assert pending[plan.instant_time] == waiting
    assert [(r["what"], r["pid"]) for r in now["running"]] == [("archival", os.getpid())]
    assert f"{dead.instant.requested_time} deltacommit inflight" in text
    assert "dead (the next write rolls it back)" in text and ": aborted" in text and ": alive" in text
    assert f"{plan.instant_time} compaction requested, not running" in text
    assert f"running archival, pid {os.getpid()}" in text


def test_a_zookeeper_tables_describe_says_where_its_lock_lives(tmp_path: Path) -> None:
    from lakecore.config import LockSpec

    uri = str(tmp_path / "z")
    Table.create(uri, schema=rows([]).schema, record_key="id",
                 lock=LockSpec("zookeeper", connect="127.0.0.1:1", path="/weir/locks/z"))
    now, text = describe(uri)  # reads storage only: no ZooKeeper needed, none answers here
    assert now["lock"] == {"provider": "zookeeper", "connect": "127.0.0.1:1", "path": "/weir/locks/z"}
    assert "lock zookeeper at 127.0.0.1:1/weir/locks/z" in text


def test_describe_names_the_column_types_as_a_laketable_does(tmp_path: Path) -> None:
    """The schema read `timestamp` and `decimal`, leaving out the unit, the zone and the precision that
    `--schema` and a LakeTable's spec.schema are written with."""
    uri = str(tmp_path / "t")
    schema = "id:int64,at:timestamp,ms:timestamp_ms,amt:decimal128(10,2),d:date"
    made = CliRunner().invoke(app, ["table", "create", uri, "--schema", schema, "--record-key", "id"])
    assert made.exit_code == 0, made.output
    _, text = describe(uri)
    assert "schema id int64 at timestamp_us ms timestamp_ms amt decimal128(10,2) d date32" in text, text
