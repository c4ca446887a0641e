"""Compaction running while writer processes write (OCC and NBCC, real ZooKeeper lock): no lost
update, no writer aborted because of a compaction (the history checker checks every conflict names a
write), and compactions complete meanwhile."""

import subprocess
import sys
import time

import pytest

from lakecore import Table
from lakecore.concurrency.locks.zookeeper import zookeeper_lock
from lakecore.concurrency.zookeeper import table_lock_key
from lakecore.config import LockSpec
from lakecore.errors import CompactionPending
from lakecore.services import run_compaction, schedule_compaction
from tests.lakecore.concurrency.history import check, load_log
from tests.lakecore.concurrency.test_many_writers_lose_nothing import SCHEMA, SEED, batch_of

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


@pytest.mark.parametrize("mode", ["optimistic", "non_blocking"])
def test_two_writers_and_a_compactor(tmp_path, zookeeper_server, mode):
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=8, concurrency_mode=mode,
                 lock=LockSpec("zookeeper", connect=zookeeper_server.connect_string))
    log = str(tmp_path / "log.jsonl")
    connect = zookeeper_server.connect_string
    module = "tests.lakecore.concurrency.writer_process"
    procs = [subprocess.Popen([sys.executable, "-m", module, uri, connect, str(w), "30", str(SEED), log],
                              stderr=subprocess.PIPE, text=True) for w in range(2)]
    t = Table.open(uri, lock=zookeeper_lock(connect, table_lock_key(uri)))
    compactions = 0
    while any(p.poll() is None for p in procs):
        time.sleep(0.05)
        try:
            plan = schedule_compaction(t.storage, t.config, t.lock)
        except CompactionPending:
            continue
        if plan is not None:
            run_compaction(t.storage, t.config, t.lock, plan)
            compactions += 1
    errors = [p.communicate(timeout=300)[1] for p in procs]  # every pipe drained and closed first
    for p, err in zip(procs, errors, strict=True):
        assert p.returncode == 0, err
    assert compactions >= 2
    entries = load_log(log)
    verdict = check(Table.open(uri), entries, batch_of)
    if mode == "non_blocking":
        assert verdict.conflicts == 0
