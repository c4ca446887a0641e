"""ZooKeeper stopped or restarted under running writers: writers fail with a clear error or resume;
no commit completes without the lock; afterwards the history checker finds nothing lost."""

import subprocess
import sys
import time

import pyarrow as pa
import pytest

from lakecore import Table, WriterOptions
from lakecore.concurrency import begin_write, commit_write, rollback_failed_writes
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.concurrency.locks.zookeeper import zookeeper_lock
from lakecore.concurrency.zookeeper import table_lock_key
from lakecore.config import LockSpec
from lakecore.errors import LockError
from lakecore.timeline.instant_time import format_ms, now_ms
from lakecore.write import conform, route, write_file_group
from tests.lakecore.concurrency.history import check, load_log
from tests.lakecore.concurrency.test_many_writers_lose_nothing import SCHEMA, batch_of

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


def test_a_commit_whose_lock_session_is_lost_does_not_complete(tmp_path, zookeeper_factory):
    zk = zookeeper_factory()
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", lock=LockSpec("zookeeper", connect=zk.connect_string))
    lock = zookeeper_lock(zk.connect_string, table_lock_key(uri), session_timeout_s=2, connection_timeout_s=1,
                          acquire_timeout_s=2)
    t = Table.open(uri, lock=lock)
    txn = begin_write(t.storage, t.config, t.lock, "upsert")
    data = batch_of("w0-0")
    stats = [s for g in route(conform(data, t.config, "upsert").rows, t.config)
             for s in write_file_group(txn.context(), g)]
    zk.stop()
    with pytest.raises(LockError, match="ZooKeeper"):
        commit_write(txn, stats, lock=t.lock)
    from lakecore.timeline import TimelineStore
    assert not TimelineStore(t.storage).load().completed  # nothing completed without the lock


def test_writers_survive_a_zookeeper_restart_without_losing_commits(tmp_path, zookeeper_factory):
    zk = zookeeper_factory()
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=16,
                 lock=LockSpec("zookeeper", connect=zk.connect_string))
    log = str(tmp_path / "log.jsonl")
    back_file = tmp_path / "back"  # the time ZooKeeper came back, once it has
    procs = [subprocess.Popen([sys.executable, "-m", "tests.lakecore.concurrency.writer_process", uri,
                               zk.connect_string, str(w), "40", "7", log, "tolerate-outages",
                               f"resume-after={back_file}"],
                              stderr=subprocess.PIPE, text=True) for w in range(3)]
    time.sleep(2.0)
    zk.stop()
    time.sleep(3.0)
    zk.restart()
    back = format_ms(now_ms())
    (tmp_path / "back.tmp").write_text(back)
    (tmp_path / "back.tmp").rename(back_file)
    errors = [p.communicate(timeout=400)[1] for p in procs]  # every pipe drained and closed first
    for p, err in zip(procs, errors, strict=True):
        assert p.returncode == 0, err
    entries = load_log(log)
    for w in range(3):
        mine = [e for e in entries if e["batch"].startswith(f"w{w}-")]
        assert len(mine) >= 40  # every writer went on to its last batch
        # and, going on past it when it had to, committed a write begun after ZooKeeper came back.
        # (Three writers upserting keys spread over all 16 file groups lose most races to each other,
        # more the slower the machine, so the batches this takes are timing.)
        assert any(e["outcome"] == "committed" and e["instant"] >= back for e in mine), mine
    for e in entries:
        if e["outcome"] == "failed":
            assert "ZooKeeper" in e["message"] or "lock" in e["message"].lower(), e
    # writes that failed mid-way may be left pending: the lazy cleanup removes them once expired
    hb = HeartbeatConfig(interval_s=0.5, tolerable_misses=4)
    time.sleep(hb.timeout_ms / 1000 + 0.5)
    lock = zookeeper_lock(zk.connect_string, table_lock_key(uri))
    t = Table.open(uri, lock=lock, options=WriterOptions(heartbeat=hb))
    rollback_failed_writes(t.storage, t.lock, hb)
    check(Table.open(uri), entries, batch_of)


def test_unreachable_zookeeper_fails_a_write_fast_and_cleanly(tmp_path):
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", lock=LockSpec("zookeeper", connect="127.0.0.1:1"))
    lock = zookeeper_lock("127.0.0.1:1", table_lock_key(uri), connection_timeout_s=1, acquire_timeout_s=1)
    t = Table.open(uri, lock=lock)
    started = time.monotonic()
    with pytest.raises(LockError, match=r"127\.0\.0\.1:1"):
        t.upsert(pa.table({"id": pa.array([1], pa.int64()), "writer": [0], "seq": [0], "v": [0.5]}))
    assert time.monotonic() - started < 10
    assert len(Table.open(uri).timeline()) == 0
