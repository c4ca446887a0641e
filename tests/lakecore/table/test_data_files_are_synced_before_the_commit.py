"""A write's data files are synced on threads of their own while its tasks go on to their next file
group (`write.syncs.BackgroundSyncs`), and the commit point still comes after every sync: a held sync
holds the commit, and a failed one fails the write, which is rolled back and leaves no file."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.errors import StorageError
from lakecore.storage.local import LocalStorage

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("s", pa.string())])


class HeldSyncs(LocalStorage):
    """LocalStorage (syncing) whose syncs of data files can be held (`release` cleared) or fail
    (`fail`); it records the thread each sync ran on."""

    def __init__(self, root: str) -> None:
        super().__init__(root, fsync=True)
        self.release = threading.Event()
        self.release.set()
        self.started = threading.Event()
        self.fail: Exception | None = None
        self.synced: list[tuple[str, str]] = []  # (path, thread name)

    def sync(self, path: str) -> None:
        if path.endswith(".parquet"):
            self.started.set()
            assert self.release.wait(60), "the test never released the sync"
            if self.fail is not None:
                raise self.fail
        super().sync(path)
        self.synced.append((path, threading.current_thread().name))


def rows(n: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"id": rng.permutation(n), "ts": rng.integers(0, 9, n),
                     "s": [f"s{i}" for i in range(n)]}, schema=SCHEMA)


def table_on(tmp_path: Path) -> tuple[Table, HeldSyncs]:
    created = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts",
                           buckets=4)
    storage = HeldSyncs(created.uri)
    return Table(storage, created.config), storage


def data_files(uri: str) -> list[Path]:
    return [p for p in Path(uri).rglob("*.parquet") if ".weir" not in p.parts]


def test_files_sync_off_the_task_threads_and_the_commit_waits_for_them(tmp_path) -> None:
    table, storage = table_on(tmp_path)
    storage.release.clear()
    errors: list[BaseException] = []

    def write() -> None:
        try:
            table.bulk_insert(rows(20_000))
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    assert storage.started.wait(60)
    time.sleep(0.5)  # every task has written its file by now; the syncs are held
    assert writer.is_alive()
    assert Table.open(table.uri).timeline().completed == (), "committed before its files were durable"
    storage.release.set()
    writer.join(60)
    assert not errors, errors
    assert len(Table.open(table.uri).timeline().completed) == 1
    synced = {path for path, _ in storage.synced}
    files = {str(p.relative_to(table.uri)) for p in data_files(table.uri)}
    assert len(files) == 4 and files <= synced
    threads = {name for path, name in storage.synced if path.endswith(".parquet")}
    assert threads and all(name.startswith("weir-sync") for name in threads), threads


def test_a_failed_sync_fails_the_write_and_leaves_nothing(tmp_path) -> None:
    table, storage = table_on(tmp_path)
    storage.fail = StorageError("I/O error syncing a data file (injected)")
    with pytest.raises(StorageError, match="injected"):
        table.bulk_insert(rows(20_000))
    reopened = Table.open(table.uri)
    assert [i.action for i in reopened.timeline().completed] == ["rollback"]
    assert reopened.read().num_rows == 0
    assert data_files(table.uri) == [], "the failed write's files are rolled back"
    storage.fail = None
    table.bulk_insert(rows(20_000, seed=2))
    assert Table.open(table.uri).read().num_rows == 20_000
