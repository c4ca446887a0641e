"""kill -9 of a writer at every point of the protocol, with the storage lock and with ZooKeeper:
the table stays readable with exactly the committed data, and the NEXT writer cleans up (lazy
rollback once the dead writer's heartbeat expired); nothing committed is lost."""

import os
import subprocess
import sys
import time

import pytest

from lakecore import Table, WriterOptions
from lakecore.concurrency import StorageLock
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.config import LockSpec
from tests.lakecore.table.crash_writer import batch
from tests.lakecore.table.test_crash_leaves_table_readable import ROOT, actual, data_files, expected

pytestmark = pytest.mark.crash
POINTS = ["before_markers", "after_first_file", "mid_file", "before_complete", "after_complete"]
FAST = HeartbeatConfig(interval_s=0.2, tolerable_misses=2)


def lock_for(provider, uri, zk):
    if provider == "zookeeper":
        from lakecore.concurrency.locks.zookeeper import zookeeper_lock
        from lakecore.concurrency.zookeeper import table_lock_key
        return zookeeper_lock(zk.connect_string, table_lock_key(uri), session_timeout_s=2)
    return StorageLock(Table.open(uri).storage, expiry_s=2.0)


@pytest.mark.parametrize("provider", ["storage", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
@pytest.mark.parametrize("point", POINTS)
def test_the_next_writer_recovers_from_a_writer_killed_at(tmp_path, point, provider, request):
    zk = request.getfixturevalue("zookeeper_server") if provider == "zookeeper" else None
    uri = str(tmp_path / "t")
    from tests.lakecore.table.conftest import SCHEMA
    lock = LockSpec("zookeeper", connect=zk.connect_string) if zk else None
    Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=4, lock=lock).upsert(
        batch(0), extra={"batch": 0})
    env = dict(os.environ, WEIR_TEST_ZOOKEEPER=zk.connect_string if zk else "")
    args = [sys.executable, "-m", "tests.lakecore.table.crash_writer", uri, "point", point, "1"]
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -9, proc.stderr
    survivor = Table.open(uri, lock=lock_for(provider, uri, zk), options=WriterOptions(heartbeat=FAST))
    assert actual(survivor) == expected(survivor)  # readable, exactly the committed data
    time.sleep(FAST.timeout_ms / 1000 + 0.2)
    survivor.upsert(batch(2), extra={"batch": 2})  # waits out a dead holder's lock, then cleans up
    assert survivor.timeline().pending == ()
    completed = survivor.timeline().completed
    live = {s.file_name for i in completed for s in survivor.commit_metadata(i).write_stats}
    assert data_files(uri) == live
    assert actual(survivor) == expected(survivor)
    assert {0, 2} <= {survivor.commit_metadata(i).extra.get("batch") for i in survivor.timeline().completed}
