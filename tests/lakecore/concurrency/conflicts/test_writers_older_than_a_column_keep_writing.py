"""A writer that still writes the table's old schema after another writer added a nullable column keeps
writing (backwards compatibility, the seeds' schema-evolution case 6, for long-running writers too):
a handle opened before the column was added and a fresh one both commit old-schema rows, which read
the column as null, and the table keeps the column and every value other writers stored in it. A
missing non-nullable column is refused, and every refusal names the column."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore import FileOptions, Table, WriterOptions
from lakecore.concurrency import begin_write, commit_write
from lakecore.errors import MissingColumn, SchemaConflict
from lakecore.write import conform, route, write_file_group

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
EVOLVE = WriterOptions(files=FileOptions(evolve_schema=True))


def old_rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"old{i}" for i in ids]})


def state(uri: str) -> dict[int, dict]:
    return {r["id"]: r for r in Table.open(uri).read().to_pylist()}


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_a_handle_opened_before_a_column_was_added_still_writes_the_old_schema(tmp_path, table_type):
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=1, table_type=table_type)
    long_running = Table.open(uri)                   # opened before the column exists
    Table.open(uri, options=EVOLVE).upsert(pa.table({"id": pa.array([1, 2], pa.int64()), "v": ["n1", "n2"],
                                                     "score": [0.5, 1.5]}))
    long_running.upsert(old_rows([2, 3]))             # same file group as the rows holding scores

    assert Table.open(uri).schema.names == ["id", "v", "score"]
    assert long_running.schema.names == ["id", "v", "score"]  # the handle caught up with its commit
    assert state(uri) == {1: {"id": 1, "v": "n1", "score": 0.5}, 2: {"id": 2, "v": "old2", "score": None},
                          3: {"id": 3, "v": "old3", "score": None}}


def test_a_handle_opened_before_a_column_was_added_may_add_its_own(tmp_path):
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=1)
    long_running = Table.open(uri, options=EVOLVE)
    Table.open(uri, options=EVOLVE).upsert(pa.table({"id": pa.array([1], pa.int64()), "v": ["n1"],
                                                     "score": [0.5]}))
    long_running.upsert(pa.table({"id": pa.array([2], pa.int64()), "v": ["x"], "tag": ["t"]}))
    assert Table.open(uri).schema.names == ["id", "v", "score", "tag"]
    assert state(uri) == {1: {"id": 1, "v": "n1", "score": 0.5, "tag": None},
                          2: {"id": 2, "v": "x", "score": None, "tag": "t"}}


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_a_fresh_handle_writes_rows_without_a_nullable_column(tmp_path, table_type):
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=1, table_type=table_type, options=EVOLVE) \
        .upsert(pa.table({"id": pa.array([1], pa.int64()), "v": ["n1"], "score": [0.5]}))
    Table.open(uri).upsert(old_rows([2]))
    assert state(uri) == {1: {"id": 1, "v": "n1", "score": 0.5}, 2: {"id": 2, "v": "old2", "score": None}}


def test_rows_without_a_non_nullable_column_are_refused_naming_it(tmp_path):
    strict = pa.schema([("id", pa.int64()), ("v", pa.string()), pa.field("n", pa.int64(), nullable=False)])
    t = Table.create(str(tmp_path / "t"), schema=strict, record_key="id")
    with pytest.raises(MissingColumn, match=r"non-nullable table column\(s\) \['n'\]"):
        t.upsert(old_rows([1]))


def test_a_writer_schema_without_a_non_nullable_column_conflicts_naming_it(tmp_path):
    strict = pa.schema([("id", pa.int64()), ("v", pa.string()), pa.field("n", pa.int64(), nullable=False)])
    t = Table.create(str(tmp_path / "t"), schema=strict, record_key="id", buckets=1)
    t.upsert(pa.table({"id": pa.array([1], pa.int64()), "v": ["a"], "n": pa.array([1], pa.int64())}))
    config = t.config.with_schema(SCHEMA)             # a writer that does not know `n`
    txn = begin_write(t.storage, config, t.lock, "upsert")
    stats = [s for g in route(conform(old_rows([2]), config, "upsert").rows, config)
             for s in write_file_group(txn.context(), g)]
    with pytest.raises(SchemaConflict, match=r"'n' \(int64 not null\) is missing"):
        commit_write(txn, stats, lock=t.lock)
    assert list(state(t.uri)) == [1]
