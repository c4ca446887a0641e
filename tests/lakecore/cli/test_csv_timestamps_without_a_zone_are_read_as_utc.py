"""A CSV timestamp without a zone offset is read as UTC, as a JSON one is: it used to be refused with
pyarrow's advice to "call assume_timezone", which a CLI user cannot do. Values with an offset keep it; a
column that mixes both is refused, naming it, and nothing is written."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.cli.io import read_input
from lakecore.errors import InvalidInput
from tests.lakecore.cli.test_errors_are_one_line_with_a_remedy import weir

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("ts", pa.timestamp("us", tz="UTC")),
                    pa.field("ms", pa.timestamp("ms", tz="UTC")), pa.field("n", pa.string())])


def test_naive_values_are_utc_and_offsets_are_kept(tmp_path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("id,ts,ms,n\n1,2026-01-01 10:00:00,2026-01-01 10:00:00.123,a\n2,2026-01-01 11:30:00,,b\n")
    read = read_input(str(path), SCHEMA)
    assert read.schema.field("ts").type == SCHEMA.field("ts").type
    assert read.column("ts").to_pylist() == [datetime(2026, 1, 1, 10, tzinfo=UTC),
                                             datetime(2026, 1, 1, 11, 30, tzinfo=UTC)]
    assert read.column("ms").to_pylist() == [datetime(2026, 1, 1, 10, 0, 0, 123000, tzinfo=UTC), None]
    json_file = tmp_path / "in.json"
    json_file.write_text('{"id": 1, "ts": "2026-01-01 10:00:00"}\n')
    assert read_input(str(json_file), SCHEMA).column("ts").to_pylist() == read.column("ts").to_pylist()[:1]
    path.write_text("id,ts,ms,n\n1,2026-01-01T10:00:00+02:00,2026-01-01T10:00:00Z,a\n")
    read = read_input(str(path), SCHEMA)
    assert read.column("ts").to_pylist() == [datetime(2026, 1, 1, 8, tzinfo=UTC)]


def test_a_column_mixing_both_is_refused_naming_it(tmp_path) -> None:
    path = tmp_path / "in.csv"
    path.write_text("id,ts,ms,n\n1,2026-01-01 10:00:00,,a\n2,2026-01-01T10:00:00Z,,b\n")
    with pytest.raises(InvalidInput) as told:
        read_input(str(path), SCHEMA)
    assert "mixes timestamps with and without a zone offset (column 'ts':" in str(told.value)
    assert "give every value of the column an offset (such as 'Z' or '+02:00') or none" in str(told.value)


def test_weir_table_upsert_takes_them(tmp_path) -> None:
    uri = str(tmp_path / "t")
    made = weir("table", "create", uri, "--schema", "id:int64,ts:timestamp", "--record-key", "id")
    assert made.returncode == 0, made.stderr
    (tmp_path / "in.csv").write_text("id,ts\n1,2026-11-29 10:00:00\n")
    done = weir("table", "upsert", uri, str(tmp_path / "in.csv"))
    assert done.returncode == 0, done.stderr
    assert Table.open(uri).read().column("ts").to_pylist() == [datetime(2026, 11, 29, 10, tzinfo=UTC)]
    # a condition's time without an offset is UTC too (it was refused with pyarrow's assume_timezone advice)
    table = Table.open(uri)
    assert table.read(filter="ts >= '2026-11-29T10:00:00'").num_rows == 1
    assert table.read(filter="ts > '2026-11-29 10:00:00'").num_rows == 0
    assert table.read(filter="ts > '2026-11-29T10:00:00+01:00'").num_rows == 1
