"""`weir table read` writes what `Table.read` returns, streamed from a scan: slice by slice (a Parquet
output gets a row group per batch, where a whole-table write would make one), in every format, and the
human view counts every row while holding only the ones it shows."""

from __future__ import annotations

import csv
import io
import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
from typer.testing import CliRunner

from lakecore.cli.main import app
from tests.lakecore.table.scan_tables import merge_on_read_table

runner = CliRunner()


def weir(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def by_id(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda r: r["id"])


def test_weir_table_read_streams_its_rows(tmp_path):
    uri = str(tmp_path / "t")
    table = merge_on_read_table(uri)
    expected = table.read()

    dest = tmp_path / "out.parquet"
    code, out = weir("table", "read", uri, "--output", str(dest))
    assert code == 0 and f"wrote {expected.num_rows} rows" in out
    written = pq.ParquetFile(dest)
    assert written.metadata.num_row_groups > 1
    assert written.read().sort_by("id").equals(expected.sort_by("id"))

    code, out = weir("table", "read", uri, "--format", "json")
    assert code == 0
    assert by_id([json.loads(line) for line in out.splitlines()]) == by_id(expected.to_pylist())

    code, out = weir("table", "read", uri, "--format", "csv", "--columns", "id,name")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == expected.num_rows
    assert sorted(int(r["id"]) for r in rows) == sorted(expected["id"].to_pylist())

    code, out = weir("table", "read", uri, "--limit", "5")
    assert code == 0
    assert f"{expected.num_rows} rows" in out and f"... {expected.num_rows - 5} more rows" in out

    code, out = weir("table", "read", uri, "--format", "json", "--output", str(tmp_path / "out.jsonl"))
    assert code == 0
    assert pc.sum(expected["id"]).as_py() == sum(
        json.loads(line)["id"] for line in (tmp_path / "out.jsonl").read_text().splitlines())
