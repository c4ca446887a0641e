"""commit_write writes the completed instant's bytes before it takes the lock, for the schema the
table had when the write began. When another writer changed the schema in between, the lock's own
decision wins: the column the other writer added stays in the table (a commit that published the
bytes written ahead would drop it). Bytes written ahead never linger in the timeline directory,
whether the commit used them, re-decided, or lost a conflict."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest

from lakecore import FileOptions, Table, WriterOptions
from lakecore.concurrency import begin_write, commit_write
from lakecore.errors import WriteConflict
from lakecore.storage.local import TMP_MARK
from lakecore.timeline.store import clear_cache
from lakecore.write import conform, route, write_file_group

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _write_files(txn, rows: pa.Table) -> list:
    conformed = conform(rows, txn.config, txn.operation).rows
    return [s for g in route(conformed, txn.config) for s in write_file_group(txn.context(), g)]


def _leftovers(uri: str) -> list[str]:
    return [n for n in os.listdir(os.path.join(uri, ".weir", "timeline")) if TMP_MARK in n]


def test_a_column_added_while_a_write_ran_stays_in_the_table(tmp_path):
    uri = str(tmp_path / "t")
    table = Table.create(uri, schema=SCHEMA, record_key="id", buckets=2, table_type="merge_on_read",
                         concurrency_mode="non_blocking")
    # our write begins on the two-column table ...
    txn = begin_write(table.storage, table.config, table.lock, "upsert")
    stats = _write_files(txn, pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["a", "b"]}))
    # ... another writer adds a nullable column and commits before ours does
    Table.open(uri, options=WriterOptions(files=FileOptions(evolve_schema=True))).upsert(
        pa.table({"id": pa.array([3], pa.int64()), "v": ["c"], "score": [0.5]}))
    done = commit_write(txn, stats, lock=table.lock)

    clear_cache()  # what the file says, as another process reads it
    with open(os.path.join(uri, ".weir", "timeline", done.file_name), "rb") as fh:
        recorded = json.load(fh)["schema"]
    assert [f["name"] for f in recorded] == ["id", "v", "score"]
    reopened = Table.open(uri)
    assert reopened.schema.names == ["id", "v", "score"]
    rows = {r["id"]: r for r in reopened.read().to_pylist()}
    assert rows == {1: {"id": 1, "v": "a", "score": None}, 2: {"id": 2, "v": "b", "score": None},
                    3: {"id": 3, "v": "c", "score": 0.5}}
    assert _leftovers(uri) == []


def test_an_unchanged_schema_commits_the_bytes_written_ahead(tmp_path, monkeypatch):
    uri = str(tmp_path / "t")
    table = Table.create(uri, schema=SCHEMA, record_key="id", buckets=2, table_type="merge_on_read")
    txn = begin_write(table.storage, table.config, table.lock, "upsert")
    stats = _write_files(txn, pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}))
    ahead: list[str] = []     # temp files in the timeline directory when the commit took the lock
    linked: dict[str, str] = {}
    real_acquire, real_link = table.lock.acquire, os.link

    def acquire(timeout=None):
        ahead.extend(_leftovers(uri))
        real_acquire(timeout)

    def link(src, dst, *a, **kw):
        real_link(src, dst, *a, **kw)
        linked[os.path.basename(dst)] = os.path.basename(src)

    monkeypatch.setattr(table.lock, "acquire", acquire)
    monkeypatch.setattr(os, "link", link)
    done = commit_write(txn, stats, lock=table.lock)
    monkeypatch.undo()
    assert linked[done.file_name] in ahead, "the completed file's bytes were written under the lock"
    assert Table.open(uri).read().to_pylist() == [{"id": 1, "v": "a"}]
    assert _leftovers(uri) == []


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_a_write_that_loses_its_conflict_leaves_no_bytes_written_ahead(tmp_path, table_type):
    uri = str(tmp_path / "t")
    table = Table.create(uri, schema=SCHEMA, record_key="id", buckets=1, table_type=table_type,
                         concurrency_mode="optimistic")
    Table.open(uri).bulk_insert(pa.table({"id": pa.array([1], pa.int64()), "v": ["base"]}))
    txn = begin_write(table.storage, table.config, table.lock, "upsert", need_view=True)
    stats = _write_files(txn, pa.table({"id": pa.array([1], pa.int64()), "v": ["ours"]}))
    Table.open(uri).upsert(pa.table({"id": pa.array([1], pa.int64()), "v": ["theirs"]}))
    if table_type == "merge_on_read":  # log writes conflict with base writers only: make theirs one
        Table.open(uri).maintenance.compact()
    with pytest.raises(WriteConflict):
        commit_write(txn, stats, lock=table.lock)
    assert _leftovers(uri) == []
    assert Table.open(uri).read().to_pylist() == [{"id": 1, "v": "theirs"}]
