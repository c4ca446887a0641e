"""`weir table read --format json|csv` writes what other tools read back: JSON lines that are standard
JSON (binary as base64, decimals exact, times ISO 8601, NaN and infinities as Spark's strings: a bare
NaN is not JSON and jq refuses it) and CSV with binary as base64. A column CSV cannot hold (a list) is
refused before anything is written, named, with what to do: it was told as a damaged data file with
`restore it from a backup`, as was a binary value that is not UTF-8."""

from __future__ import annotations

import base64
import csv
import datetime
import decimal
import io
import json

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("b", pa.binary()),
                    ("d", pa.decimal128(10, 2)), ("t", pa.timestamp("us", tz="UTC")), ("day", pa.date32()),
                    ("f", pa.float64()), ("fs", pa.list_(pa.float64()))])
UTC = datetime.UTC
ROWS = {"id": [1, 2, 3, 4],
        "b": [b"\x00\xff\xfe", b"plain", None, b""],
        "d": [decimal.Decimal("19.99"), decimal.Decimal("-0.01"), None, decimal.Decimal("12345678.90")],
        "t": [datetime.datetime(2026, 1, 1, 12, 30, 0, 123456, tzinfo=UTC), None, None, None],
        "day": [datetime.date(2026, 2, 3), None, None, None],
        "f": [float("nan"), float("inf"), float("-inf"), 0.1],
        "fs": [[1.5, float("nan")], None, [], [float("-inf")]]}


def weir(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


@pytest.fixture
def table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    t.upsert(pa.table(ROWS, schema=SCHEMA))
    return t


def strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"not standard JSON: bare {name} in {text!r}")
    return json.loads(text, parse_constant=refuse)


def test_json_lines_are_standard_json_that_says_every_value(table, tmp_path) -> None:
    out = tmp_path / "rows.jsonl"
    code, said = weir("table", "read", table.uri, "--format", "json", "--output", str(out))
    assert code == 0, said
    rows = {r["id"]: r for r in map(strict, out.read_text().splitlines())}
    assert [base64.b64decode(rows[i]["b"]) if rows[i]["b"] is not None else None for i in range(1, 5)] == \
        ROWS["b"]
    assert [rows[i]["d"] for i in range(1, 5)] == ["19.99", "-0.01", None, "12345678.90"]
    assert datetime.datetime.fromisoformat(rows[1]["t"]) == ROWS["t"][0]
    assert rows[1]["day"] == "2026-02-03"
    assert [rows[i]["f"] for i in range(1, 5)] == ["NaN", "Infinity", "-Infinity", 0.1]
    assert [rows[i]["fs"] for i in range(1, 5)] == [[1.5, "NaN"], None, [], ["-Infinity"]]
    code, shown = weir("table", "read", table.uri, "--json")   # the terminal's --json: the same lines
    assert code == 0 and sorted(map(strict, shown.splitlines()), key=lambda r: r["id"]) == \
        [rows[i] for i in range(1, 5)]


def test_csv_writes_binary_as_base64(table, tmp_path) -> None:
    out = tmp_path / "rows.csv"
    code, said = weir("table", "read", table.uri, "--format", "csv", "--columns", "id,b,d,f",
                      "--output", str(out))
    assert code == 0, said
    rows = {int(r["id"]): r for r in csv.DictReader(io.StringIO(out.read_text()))}
    assert [base64.b64decode(rows[i]["b"]) for i in (1, 2, 4)] == [b"\x00\xff\xfe", b"plain", b""]
    assert rows[3]["b"] == "" and rows[1]["d"] == "19.99"


def test_a_column_csv_cannot_hold_is_refused_before_anything_is_written(table, tmp_path) -> None:
    out = tmp_path / "rows.csv"
    code, said = weir("table", "read", table.uri, "--format", "csv", "--output", str(out))
    assert code == 1
    assert "CSV cannot hold the nested column(s) fs (list<" in said and "--format json" in said, said
    assert "damaged" not in said and "backup" not in said
    assert list(tmp_path.iterdir()) == [tmp_path / "t"]   # no file, no partial file
