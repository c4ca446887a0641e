"""`weir table overwrite`: the touched partitions (insert_overwrite) or, with --table, the whole table."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


def weir(*args):
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_overwrite_the_touched_partitions_then_the_whole_table(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", partition_fields=["dt"])
    t.upsert(pa.table({"id": [1, 2, 3], "dt": ["a", "a", "b"], "v": ["old"] * 3}, schema=SCHEMA))
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [9], "dt": ["a"], "v": ["new"]}, schema=SCHEMA), src)
    code, out = weir("table", "overwrite", t.uri, "-i", str(src), "--json")
    assert code == 0, out
    assert json.loads(out)["records"] == 1
    assert sorted((r["dt"], r["id"]) for r in t.read().to_pylist()) == [("a", 9), ("b", 3)]
    code, out = weir("table", "overwrite", t.uri, "-i", str(src), "--table")
    assert code == 0, out
    assert "insert_overwrite_table" in out
    assert [(r["dt"], r["id"]) for r in t.read().to_pylist()] == [("a", 9)]
    assert [t.commit_metadata(i).operation for i in t.timeline().completed] == \
        ["upsert", "insert_overwrite", "insert_overwrite_table"]
