"""`read(as_of=...)` (and a scan, and `weir table read --as-of`) gives the columns the table's commits had
then, as an Iceberg snapshot or a Delta version of that instant does: a column added later is not there
(it was, all null). Columns asked for by name are given as asked, a later one null; reading now gives
every column."""

from __future__ import annotations

import json

import pyarrow as pa

from lakecore import FileOptions, Table, WriterOptions
from tests.lakecore.cli.test_weir_table_commands import weir
from tests.lakecore.publish.readers import iceberg

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
EVOLVE = WriterOptions(files=FileOptions(evolve_schema=True))


def test_an_as_of_read_has_the_columns_of_its_time(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", table_type="copy_on_write")
    first = t.upsert(pa.table({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA)).instant.requested_time
    before = t.publish("iceberg").snapshot.id
    Table.open(t.uri, options=EVOLVE).upsert(pa.table({"id": [3], "name": ["c"], "city": ["x"]}))
    t = Table.open(t.uri)
    t.publish("iceberg")

    then = t.read(as_of=first)
    assert then.schema.names == ["id", "name"]
    assert iceberg(t.uri, snapshot_id=before).schema.names == then.schema.names   # as Iceberg reads it
    assert sorted(then.to_pylist(), key=lambda r: r["id"]) == [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]
    assert t.scan(as_of=first).to_arrow().schema.names == ["id", "name"]
    named = sorted(t.read(as_of=first, columns=["id", "city"]).to_pylist(), key=lambda r: r["id"])
    assert named == [{"id": 1, "city": None}, {"id": 2, "city": None}]
    assert t.read().schema.names == ["id", "name", "city"]

    code, said = weir("table", "read", t.uri, "--as-of", first, "--format", "json")
    assert code == 0 and [set(json.loads(line)) for line in said.splitlines()] == [{"id", "name"}] * 2, said
