"""`weir table create` with a misspelt type or column says which one was probably meant and lists the
choices as words (not a Python list), and creates nothing."""

from __future__ import annotations

import os

from typer.testing import CliRunner

from lakecore.cli.main import app

runner = CliRunner()


def create(uri: str, schema: str, *extra: str) -> tuple[int, str]:
    result = runner.invoke(app, ["table", "create", uri, "--schema", schema, *extra])
    return result.exit_code, " ".join(result.output.split())


def test_a_misspelt_type(tmp_path) -> None:
    uri = str(tmp_path / "t")
    code, out = create(uri, "id:int64,ts:int64,name:strin", "--record-key", "id")
    assert code == 1
    assert "unknown type 'strin' for column 'name' (did you mean string?)" in out, out
    assert "use one of bool, int8, int16," in out and "['" not in out, out
    assert not os.path.exists(uri)


def test_a_misspelt_record_key_and_ordering_field(tmp_path) -> None:
    uri = str(tmp_path / "t")
    code, out = create(uri, "id:int64,ts:int64,name:string", "--record-key", "idx")
    assert code == 1
    assert "record_key 'idx' is not in the schema (did you mean 'id'?); its columns: id, ts, name" in out, out
    code, out = create(uri, "id:int64,ts:int64,name:string", "--record-key", "id", "--ordering-field", "tss")
    assert code == 1
    assert "ordering field 'tss' is not in the schema (did you mean 'ts'?); its columns: id, ts, name" in out
    code, out = create(uri, "id:int64,ts:int64", "--record-key", "customer")
    assert code == 1 and "record_key 'customer' is not in the schema; its columns: id, ts" in out, out
    assert not os.path.exists(uri)


def test_a_misspelt_column_to_read_or_write(tmp_path) -> None:
    uri = str(tmp_path / "t")
    assert create(uri, "id:int64,ts:int64,name:string", "--record-key", "id")[0] == 0
    good, bad, other = tmp_path / "good.csv", tmp_path / "bad.csv", tmp_path / "other.csv"
    good.write_text("id,ts,name\n1,1,Ada\n")
    bad.write_text("id,ts,nmae\n2,1,Alan\n")
    other.write_text("id,ts,name,extra\n2,1,Alan,x\n")
    assert runner.invoke(app, ["table", "upsert", uri, "--input", str(good)]).exit_code == 0
    result = runner.invoke(app, ["table", "upsert", uri, "--input", str(bad)])
    out = " ".join(result.output.split())
    assert result.exit_code == 1
    assert "columns ['nmae'] are not in the table schema ['id', 'ts', 'name'] (did you mean 'name'?)" in out
    result = runner.invoke(app, ["table", "upsert", uri, "--input", str(other)])
    assert result.exit_code == 1 and "['extra'] are not in the table schema ['id', 'ts', 'name']; drop" in \
        " ".join(result.output.split())
    result = runner.invoke(app, ["table", "read", uri, "--columns", "id,nme"])
    assert result.exit_code == 1
    assert "unknown column(s) ['nme'] (did you mean 'name'?)" in " ".join(result.output.split())
    result = runner.invoke(app, ["table", "read", uri, "--json"])
    assert result.exit_code == 0 and '"Ada"' in result.output and "Alan" not in result.output
