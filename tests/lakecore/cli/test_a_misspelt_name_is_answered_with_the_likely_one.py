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
    assert "use one of binary, bool, date, double," in out and "['" not in out, out
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
