"""The table records its lock in table.json and every writer of it takes that one lock: a writer asking
for another is refused, so a ZooKeeper-locked writer and a storage-locked CLI/API writer can never run
their critical sections at once; changing the lock is an explicit operation under both locks."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from lakecore.concurrency import StorageLock, lock_from_options
from lakecore.errors import LockError, LockTimeout
from tests.lakecore.concurrency.locks.test_lock_contract import REPO_ROOT, in_thread

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids), "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


@pytest.mark.zookeeper
def test_a_zookeeper_locked_writer_and_a_default_writer_never_commit_at_once(tmp_path: Path,
                                                                              zookeeper_server) -> None:
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=1)  # records the storage lock (the default)
    cli = Table.open(uri)  # how `weir table upsert` opens it
    zk = lock_from_options(cli.storage, {"provider": "zookeeper", "connect": zookeeper_server.connect_string})
    try:
        job = Table.open(uri, lock=zk)  # a Spark job's writer, told to lock in ZooKeeper
    except LockError as refused:
        assert "storage lock" in str(refused) and "ZooKeeper" in str(refused), refused
        assert "set-lock" in str(refused)
        return
    with job.lock:  # the job inside its critical section, paused there
        error = in_thread(lambda: cli.upsert(rows(1)))
        completed_meanwhile = len(Table.open(uri).timeline().completed)
    zk.release()
    assert completed_meanwhile == 0, (
        f"the CLI writer completed an instant while the ZooKeeper-locked writer held the table ({error})")


@pytest.mark.zookeeper
def test_the_cli_takes_the_zookeeper_lock_the_table_records(tmp_path: Path, zookeeper_server) -> None:
    from kazoo.client import KazooClient

    from lakecore.config import LockSpec

    uri, source = str(tmp_path / "t"), tmp_path / "in.parquet"
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=1,
                 lock=LockSpec("zookeeper", connect=zookeeper_server.connect_string))
    pq.write_table(rows(1, 2), source)
    api = Table.open(uri)  # no lock given: the recorded ZooKeeper lock
    path = api.config.lock.path
    assert path is not None
    zk = KazooClient(hosts=zookeeper_server.connect_string)
    zk.start(timeout=15)
    try:
        with api.lock:  # inside the critical section, paused there while the CLI writes
            cli = subprocess.Popen([sys.executable, "-c", "from lakecore.cli.main import app; app()", "table",
                                    "upsert", uri, "-i", str(source)], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
            while len([c for c in zk.get_children(path) if "__lock__" in c]) < 2:  # the CLI queues on it
                assert cli.poll() is None, cli.communicate()
                time.sleep(0.02)
            assert Table.open(uri).timeline().completed == ()
        _, err = cli.communicate(timeout=120)
        assert cli.returncode == 0, err
    finally:
        zk.stop()
        zk.close()
    assert Table.open(uri).read().num_rows == 2


def test_a_lock_that_contradicts_the_table_is_refused_with_the_remedy(tmp_path: Path) -> None:
    from lakecore.concurrency import InProcessLock
    from lakecore.config import LockSpec
    from lakecore.errors import LockProviderMismatch

    storage_table, zk_table = str(tmp_path / "s"), str(tmp_path / "z")
    Table.create(storage_table, schema=SCHEMA, record_key="id")
    Table.create(zk_table, schema=SCHEMA, record_key="id",
                 lock=LockSpec("zookeeper", connect="zk-0:2181,zk-1:2181"))
    recorded = Table.open(zk_table).config.lock
    refused = [
        (storage_table, InProcessLock(storage_table)),
        (storage_table, LockSpec("zookeeper", connect="zk-0:2181")),
        (zk_table, StorageLock(Table.open(zk_table).storage)),
        (zk_table, LockSpec("zookeeper", connect="zk-9:2181")),
        (zk_table, LockSpec("zookeeper", connect="zk-0:2181,zk-1:2181", path="/elsewhere")),
    ]
    for uri, asked in refused:
        with pytest.raises(LockProviderMismatch) as raised:
            Table.open(uri, lock=asked)
        message = str(raised.value)
        assert "records" in message and "asked for" in message and "set-lock" in message, message
        assert not raised.value.retryable
    # the same ensemble listed in another order, and the table's own path, are the same lock
    same = Table.open(zk_table, lock=LockSpec("zookeeper", connect="zk-1:2181,zk-0:2181"))
    assert same.config.lock == recorded
    assert Table.open(storage_table, lock=LockSpec("storage")).config.lock == LockSpec()


def test_a_table_json_written_before_the_lock_was_recorded_means_the_storage_lock(tmp_path: Path) -> None:
    from lakecore.config import LockSpec

    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=SCHEMA, record_key="id")
    config = json.loads(t.storage.read(".weir/table.json"))
    assert config["lock"] == {"provider": "storage"}
    del config["lock"]
    t.storage.write(".weir/table.json", json.dumps(config).encode())
    old = Table.open(uri)
    assert old.config.lock == LockSpec("storage")
    old.upsert(rows(1))
    assert old.read().num_rows == 1


@pytest.mark.zookeeper
def test_changing_the_lock_waits_for_both_locks_and_stops_writers_opened_before(tmp_path: Path,
                                                                                zookeeper_server) -> None:
    from lakecore.config import LockSpec
    from lakecore.errors import LockProviderChanged

    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=1)
    before = Table.open(uri)  # a writer that opened the table before the change
    new = LockSpec("zookeeper", connect=zookeeper_server.connect_string)
    table = Table.open(uri)

    old_holder = StorageLock(table.storage)
    with old_holder:  # a critical section under the old lock: the change waits for it
        assert isinstance(in_thread(lambda: table.set_lock_provider(new, timeout=0.3)), LockTimeout)
    new_holder = lock_from_options(table.storage, {"provider": "zookeeper", "connect": new.connect})
    with new_holder:  # ... and for one under the new lock
        assert isinstance(in_thread(lambda: table.set_lock_provider(new, timeout=0.3)), LockTimeout)
    new_holder.release()
    assert Table.open(uri).config.lock == LockSpec("storage")  # nothing changed meanwhile

    changed = table.set_lock_provider(new, timeout=5)
    assert changed.provider == "zookeeper" and changed.path and changed.connect == new.connect
    assert Table.open(uri).config.lock == changed
    with pytest.raises(LockProviderChanged, match="open the table again"):
        before.upsert(rows(1))
    assert Table.open(uri).timeline().completed == ()
    Table.open(uri).upsert(rows(2))  # a writer opening now takes the ZooKeeper lock
    assert Table.open(uri).read().num_rows == 1
    new_holder.close()  # type: ignore[attr-defined]
