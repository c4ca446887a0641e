"""Writes whose heartbeat expired are rolled back (under the lock, re-checked); live ones never."""

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from lakecore import AfterCommitOptions, Table, WriterOptions
from lakecore.concurrency import begin_write, commit_write, rollback_failed_writes
from lakecore.concurrency.liveness.heartbeat import Heartbeat, HeartbeatConfig
from lakecore.errors import InvalidInstantState
from lakecore.timeline import now_ms
from lakecore.write import conform, route, write_file_group
from tests.lakecore.concurrency.conflicts.test_occ_conflicts import SCHEMA, data_files

FAST = HeartbeatConfig(interval_s=0.1, tolerable_misses=2)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def half_written(t: Table, ids, heartbeat: bool):
    txn = begin_write(t.storage, t.config, t.lock, "upsert")
    hb = Heartbeat(t.storage, txn.instant.requested_time, FAST).start() if heartbeat else None
    data = pa.table({"id": pa.array(ids, pa.int64()), "ts": [1] * len(ids), "v": ["x"] * len(ids)})
    stats = [s for g in route(conform(data, t.config, "upsert").rows, t.config)
             for s in write_file_group(txn.context(), g)]
    return txn, stats, hb


def test_an_expired_write_is_rolled_back_and_its_files_deleted(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    t.upsert(pa.table({"id": pa.array([9], pa.int64()), "ts": [1], "v": ["kept"]}))
    before = data_files(t)
    txn, _, _ = half_written(t, [1, 2, 3], heartbeat=False)
    assert data_files(t) > before
    assert rollback_failed_writes(t.storage, t.lock, FAST) == []  # just started: not dead yet
    time.sleep(FAST.timeout_ms / 1000 + 0.1)
    assert rollback_failed_writes(t.storage, t.lock, FAST) == [txn.instant.requested_time]
    assert t.timeline().pending == () and data_files(t) == before
    assert [r["v"] for r in t.read().to_pylist()] == ["kept"]
    assert rollback_failed_writes(t.storage, t.lock, FAST) == []  # idempotent


def test_a_live_writer_is_never_rolled_back_and_commits(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    txn, stats, hb = half_written(t, [1, 2], heartbeat=True)
    for _ in range(5):
        time.sleep(FAST.interval_s)
        assert rollback_failed_writes(t.storage, t.lock, FAST) == []
    commit_write(txn, stats, lock=t.lock)
    hb.stop()
    assert t.read().num_rows == 2


def test_a_writer_rolled_back_while_stalled_cannot_commit(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    txn, stats, hb = half_written(t, [1, 2], heartbeat=True)
    hb.stop(delete=False)  # the writer stalls: no beats
    time.sleep(FAST.timeout_ms / 1000 + 0.1)
    assert rollback_failed_writes(t.storage, t.lock, FAST) == [txn.instant.requested_time]
    with pytest.raises(InvalidInstantState, match="rolled back"):
        commit_write(txn, stats, lock=t.lock)
    assert t.read().num_rows == 0


def test_the_next_writer_cleans_up_after_a_killed_one(tmp_path):
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id")
    code = ("import sys, os, signal, pyarrow as pa\n"
            "from lakecore import Table, WriterOptions\n"
            "from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig\n"
            "import lakecore.concurrency.transaction as tx\n"
            "tx.commit_write = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
            "import lakecore.table.writer as w\n"
            "w.commit_write = tx.commit_write\n"
            "opts = WriterOptions(heartbeat=HeartbeatConfig(interval_s=0.1, tolerable_misses=2))\n"
            f"Table.open({uri!r}, options=opts).upsert(pa.table({{'id': pa.array([1], pa.int64()), "
            "'ts': [1], 'v': ['dead']}))\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    t = Table.open(uri, options=WriterOptions(heartbeat=FAST))
    (dead,) = t.timeline().pending
    time.sleep(FAST.timeout_ms / 1000 + 0.1)
    t.upsert(pa.table({"id": pa.array([2], pa.int64()), "ts": [1], "v": ["alive"]}))
    assert t.timeline().pending == ()
    rb = [i for i in t.timeline().completed if i.action == "rollback"]
    assert [t.commit_metadata(i).extra["rolled_back"] for i in rb] == [dead.requested_time]
    assert [r["v"] for r in t.read().to_pylist()] == ["alive"]


def test_a_rollback_whose_process_died_is_resumed(tmp_path):
    from lakecore.timeline import Instant, TimelineStore, next_instant_time
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    txn, _, _ = half_written(t, [1], heartbeat=False)
    store = TimelineStore(t.storage)
    # a cleaner claimed the write, then died before deleting anything
    plan = json.dumps({"rolled_back": txn.instant.requested_time, "action": "deltacommit"}).encode()
    with t.lock:
        tl = store.load()
        store.create_requested(Instant(next_instant_time(now_ms(), tl.newest_time()), "rollback"), plan)
    time.sleep(FAST.timeout_ms / 1000 + 0.1)
    assert rollback_failed_writes(t.storage, t.lock, FAST) == [txn.instant.requested_time]
    assert t.timeline().pending == ()
    assert data_files(t) == set()


def test_writer_options_can_turn_cleanup_off(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id",
                     options=WriterOptions(heartbeat=FAST,
                                           after_commit=AfterCommitOptions(clean_failed_writes=False)))
    half_written(t, [1], heartbeat=False)
    time.sleep(FAST.timeout_ms / 1000 + 0.1)
    t.upsert(pa.table({"id": pa.array([2], pa.int64()), "ts": [1], "v": ["x"]}))
    assert len(t.timeline().pending) == 1
