"""An input with a column the table lacks is refused with a remedy the command line can follow (the old
message said "evolve the table schema first", which no `weir` command did), and nothing is written;
`--evolve-schema` (upsert, insert, overwrite, write) adds the column, nullable, and says so: the rows
written before read it as null. A partial-update table, whose new columns must each join a column group,
still refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table


def weir(*args: str, cwd: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-c", "from lakecore.cli.main import main; main()", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == code, done.stdout + done.stderr
    return done


def test_a_new_column_is_refused_with_the_flag_named_then_added_with_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "people")
    weir("table", "create", uri, "--schema", "id:int64,ts:int64,name:string", "--record-key", "id",
         "--ordering-field", "ts", cwd=tmp_path)
    (tmp_path / "first.csv").write_text("id,ts,name\n1,1,ada\n2,1,grace\n")
    weir("table", "upsert", uri, "-i", "first.csv", cwd=tmp_path)
    (tmp_path / "more.csv").write_text("id,ts,name,city\n2,2,grace,arlington\n3,1,alan,london\n")

    refused = weir("table", "upsert", uri, "-i", "more.csv", cwd=tmp_path, code=1)
    assert "input columns ['city'] are not in the table schema" in refused.stderr, refused.stderr
    assert "--evolve-schema" in refused.stderr and "evolve the table schema first" not in refused.stderr
    table = Table.open(uri)
    assert len(table.timeline().completed) == 1 and table.schema.names == ["id", "ts", "name"]

    said = weir("table", "upsert", uri, "-i", "more.csv", "--evolve-schema", cwd=tmp_path).stdout
    assert said.splitlines()[1] == "the table gained 1 column: city (string)", said
    table = Table.open(uri)
    assert table.schema.names == ["id", "ts", "name", "city"] and table.schema.field("city").nullable
    rows = sorted(table.read().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 1, "ts": 1, "name": "ada", "city": None},
                    {"id": 2, "ts": 2, "name": "grace", "city": "arlington"},
                    {"id": 3, "ts": 1, "name": "alan", "city": "london"}]

    (tmp_path / "again.json").write_text('{"id": 4, "ts": 1, "name": "edsger", "city": "austin", '
                                         '"age": 72}\n')
    out = weir("table", "write", uri, "-i", "again.json", "--operation", "insert", "--evolve-schema",
               "--json", cwd=tmp_path).stdout
    assert json.loads(out)["added_columns"] == [{"name": "age", "type": "int64"}], out
    same = weir("table", "upsert", uri, "-i", "more.csv", "--evolve-schema", "--json", cwd=tmp_path).stdout
    assert json.loads(same)["added_columns"] == [], same   # nothing new: nothing said added


@pytest.mark.parametrize("command", [["insert"], ["overwrite", "--table"]])
def test_insert_and_overwrite_take_the_flag_too(tmp_path: Path, command: list[str]) -> None:
    uri = str(tmp_path / "t")
    weir("table", "create", uri, "--schema", "id:int64,ts:int64", "--record-key", "id",
         "--ordering-field", "ts", cwd=tmp_path)
    (tmp_path / "in.csv").write_text("id,ts,score\n1,1,0.5\n")
    weir(*["table", *command], uri, "-i", "in.csv", cwd=tmp_path, code=1)
    weir(*["table", *command], uri, "-i", "in.csv", "--evolve-schema", cwd=tmp_path)
    assert Table.open(uri).read().to_pylist() == [{"id": 1, "ts": 1, "score": 0.5}]


def test_a_partial_update_table_still_refuses_a_new_column(tmp_path: Path) -> None:
    uri = str(tmp_path / "wide")
    Table.create(uri, schema=pa.schema([("id", "int64"), ("a", "int64"), ("a_ts", "int64")]), record_key="id",
                 column_groups=[{"name": "g", "columns": ["a"], "ordering_field": "a_ts"}])
    (tmp_path / "in.csv").write_text("id,a,a_ts,b\n1,1,1,2\n")
    refused = weir("table", "upsert", uri, "-i", "in.csv", "--evolve-schema", cwd=tmp_path, code=1)
    assert "cannot gain columns through a write" in refused.stderr, refused.stderr
    assert not Table.open(uri).timeline().completed
