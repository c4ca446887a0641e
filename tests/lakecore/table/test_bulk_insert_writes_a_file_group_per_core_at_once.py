"""A write's file groups are written in parallel, one per core: each task holds its file open until as
many tasks as there are cores have theirs (a barrier), which passes only when that many run at once."""

import os
import threading

import pytest

from lakecore import Table
from tests.lakecore.table.conftest import SCHEMA, as_dict, rows

CORES = 4


@pytest.mark.parametrize("table_type", ["copy_on_write", "merge_on_read"])
def test_bulk_insert_writes_one_file_group_per_core_at_once(table_uri, table_type, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: CORES)
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", buckets=2 * CORES, table_type=table_type)
    together = threading.Barrier(CORES, timeout=10)
    guard = threading.Lock()
    in_flight, peak = [0], [0]
    sync = t.storage.sync

    def sync_with_the_others(path: str) -> None:
        with guard:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        try:
            together.wait()  # breaks (and fails the write) unless CORES data files are being written
        finally:
            with guard:
                in_flight[0] -= 1
        sync(path)

    monkeypatch.setattr(t.storage, "sync", sync_with_the_others)
    ids = list(range(400))
    result = t.bulk_insert(rows(ids, 1))

    assert result.file_groups == 2 * CORES
    assert peak[0] == CORES  # as many tasks as cores, no more
    monkeypatch.setattr(t.storage, "sync", sync)
    assert sorted(as_dict(t.read())) == ids


def test_a_write_with_fewer_file_groups_than_cores_runs_them_all_at_once(table_uri, monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: CORES)
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=3)
    t.bulk_insert(rows(list(range(100)), 1))
    together = threading.Barrier(3, timeout=10)
    sync = t.storage.sync

    def sync_with_the_others(path: str) -> None:
        together.wait()
        sync(path)

    monkeypatch.setattr(t.storage, "sync", sync_with_the_others)
    result = t.upsert(rows(list(range(0, 100, 2)), 2))  # one log file per bucket
    assert result.file_groups == 3
    monkeypatch.setattr(t.storage, "sync", sync)
    got = as_dict(t.read())
    assert len(got) == 100 and {r["ts"] for k, r in got.items() if k % 2 == 0} == {2}
