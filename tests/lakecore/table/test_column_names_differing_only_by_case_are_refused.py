"""Column names that differ only by case (`name`, `NAME`) are refused when a table is created and when a
column is added (Table.add_columns, a write with evolve_schema): Spark (case-insensitive by default),
Delta and DuckDB take them for one column, and such a table was published as Delta for readers that
then refused it ("Duplicate field name (case-insensitive)"). A table that holds such names already
still opens and reads, and publishing it as Delta is refused before anything is written."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import lakecore.table.table as table_module
from lakecore import FileOptions, Table, WriterOptions
from lakecore.config import CONFIG_PATH
from lakecore.errors import InvalidTableConfig, NotPublishable, SchemaMismatch

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
TWINS = r"column 'NAME' differs from 'name' only by case"


def test_a_new_table_with_case_twins_is_refused(tmp_path) -> None:
    with pytest.raises(InvalidTableConfig, match=TWINS):
        Table.create(str(tmp_path / "t"), schema=SCHEMA.append(pa.field("NAME", pa.string())),
                     record_key="id")
    assert not (tmp_path / "t").exists() or not os.listdir(tmp_path / "t")


def test_a_column_added_as_a_case_twin_is_refused_and_changes_nothing(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    t.upsert(pa.table({"id": [1], "name": ["a"]}, schema=SCHEMA))
    config = (tmp_path / "t" / CONFIG_PATH).read_bytes()
    instants = len(t.timeline().completed)
    with pytest.raises(InvalidTableConfig, match=TWINS):
        t.add_columns([pa.field("NAME", pa.string())])
    evolving = Table.open(t.uri, options=WriterOptions(files=FileOptions(evolve_schema=True)))
    with pytest.raises(SchemaMismatch, match="input " + TWINS):
        evolving.upsert(pa.table({"id": [2], "name": ["b"], "NAME": ["B"]}))
    assert (tmp_path / "t" / CONFIG_PATH).read_bytes() == config
    assert len(Table.open(t.uri).timeline().completed) == instants
    assert Table.open(t.uri).read().to_pylist() == [{"id": 1, "name": "a"}]
    evolving.upsert(pa.table({"id": [2], "name": ["b"], "name_upper": ["B"]}))   # another name is taken


def test_a_table_that_holds_case_twins_reads_and_is_not_published_as_delta(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(table_module, "case_twins", lambda names, new: None)   # a table made before the check
    schema = SCHEMA.append(pa.field("NAME", pa.string()))
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="id")
    t.upsert(pa.table({"id": [1], "name": ["a"], "NAME": ["A"]}, schema=schema))
    monkeypatch.undo()
    t = Table.open(t.uri)
    assert t.read().to_pylist() == [{"id": 1, "name": "a", "NAME": "A"}]
    with pytest.raises(NotPublishable, match="Delta cannot hold this table: " + TWINS):
        t.publish("delta")
    assert not (tmp_path / "t" / "_delta_log").exists()
    t.publish("iceberg")   # Iceberg tells them apart
