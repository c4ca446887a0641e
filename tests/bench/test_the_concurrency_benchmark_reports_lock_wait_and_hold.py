"""The NBCC benchmark's lock timing (`TimedLock` in bench/concurrency_bench.py) around a real table's
ZooKeeper lock: a write through lakecore records its waits and holds under the lakecore step that took
the lock. The figures once read zero for weeks because lakecore wraps the table's lock (TableLock calls
acquire/release) and the wrapper listened on its context manager only; this keeps them real."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.concurrency.locks.zookeeper import zookeeper_lock
from lakecore.concurrency.zookeeper import table_lock_key
from lakecore.config import LockSpec
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper]

BENCH = Path(__file__).resolve().parents[2] / "bench" / "concurrency_bench.py"


def bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("concurrency_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("concurrency_bench", module)
    spec.loader.exec_module(module)
    return module


def test_a_write_through_the_table_lock_is_timed_by_step(zookeeper_server: ZooKeeperServer,
                                                         tmp_path: Path) -> None:
    connect = zookeeper_server.connect_string
    uri = str(tmp_path / "events")
    schema = pa.schema([("key", pa.int64()), ("ts", pa.int64())])
    Table.create(uri, schema=schema, record_key="key", ordering_field="ts",
                 lock=LockSpec("zookeeper", connect=connect))
    lock = zookeeper_lock(connect, table_lock_key(uri))
    timed = bench_module().TimedLock(lock)
    table = Table.open(uri, lock=timed)
    table.upsert(pa.table({"key": pa.array([1, 2, 3], pa.int64()), "ts": pa.array([1, 1, 1], pa.int64())}))
    try:
        assert timed.spans, "the wrapper saw no acquire/release of the table's lock"
        assert all(before <= got <= let_go <= after for before, got, let_go, after in timed.spans)
        assert {"begin_write", "commit_write"} <= set(timed.held_by), timed.held_by
        assert not lock.is_held()
    finally:
        lock.close()
