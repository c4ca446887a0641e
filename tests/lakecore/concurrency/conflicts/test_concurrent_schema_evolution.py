"""Schema evolution through writes, and concurrent evolutions decided at commit (conflicts/schema.py)."""

import pyarrow as pa
import pytest

from lakecore import FileOptions, Table, WriterOptions
from lakecore.concurrency import begin_write, commit_write
from lakecore.errors import SchemaConflict, SchemaMismatch
from lakecore.write import conform, evolved_schema, route, write_file_group

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
EVOLVE = WriterOptions(files=FileOptions(evolve_schema=True))


def start(t: Table, data: pa.Table):
    """A writer that evolves the schema to fit `data`, written but not committed."""
    evolved = evolved_schema(data, t.config)
    config = t.config.with_schema(evolved) if evolved is not None else t.config
    txn = begin_write(t.storage, config, t.lock, "upsert", table_schema=t.config.schema)
    groups = route(conform(data, config, "upsert").rows, config)
    return txn, [s for g in groups for s in write_file_group(txn.context(), g)]


def test_a_write_adds_a_nullable_column_and_old_rows_read_it_as_null(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", options=EVOLVE)
    t.upsert(pa.table({"id": [1], "v": ["a"]}))
    t.upsert(pa.table({"id": [2], "v": ["b"], "score": [0.5]}))
    again = Table.open(t.uri)
    assert again.schema.names == ["id", "v", "score"]
    assert {r["id"]: r["score"] for r in again.read().to_pylist()} == {1: None, 2: 0.5}


def test_without_the_option_new_columns_are_refused(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    with pytest.raises(SchemaMismatch, match="evolve"):
        t.upsert(pa.table({"id": [1], "v": ["a"], "x": [1]}))


def test_two_writers_adding_different_nullable_columns_are_reconciled(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    a = start(t, pa.table({"id": [1], "v": ["a"], "ca": [1]}))
    b = start(t, pa.table({"id": [2], "v": ["b"], "cb": ["x"]}))
    commit_write(*a, lock=t.lock)
    commit_write(*b, lock=t.lock)  # case 8, reconciled to the union
    again = Table.open(t.uri)
    assert again.schema.names == ["id", "v", "ca", "cb"]
    got = {r["id"]: r for r in again.read().to_pylist()}
    assert got[1]["ca"] == 1 and got[1]["cb"] is None and got[2]["cb"] == "x" and got[2]["ca"] is None


def test_incompatible_concurrent_evolutions_abort_the_later_writer(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    a = start(t, pa.table({"id": [1], "v": ["a"], "c": pa.array([1], pa.int64())}))
    b = start(t, pa.table({"id": [2], "v": ["b"], "c": ["text"]}))
    commit_write(*a, lock=t.lock)
    with pytest.raises(SchemaConflict, match="'c'"):
        commit_write(*b, lock=t.lock)
    assert t.timeline().pending == ()
    assert [r["id"] for r in Table.open(t.uri).read().to_pylist()] == [1]


def test_a_writer_unaware_of_a_concurrent_evolution_commits_the_evolved_schema(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    old = start(t, pa.table({"id": [1], "v": ["a"]}))
    Table.open(t.uri, options=EVOLVE).upsert(pa.table({"id": [2], "v": ["b"], "n": [7]}))
    commit_write(*old, lock=t.lock)  # case 6: keeps the evolved schema
    assert Table.open(t.uri).schema.names == ["id", "v", "n"]
