"""`weir table read --where` keeps only the rows its conditions hold for, hands them to the scan as a
filter (files the statistics rule out are not even opened), and answers a condition it cannot use
with what is wrong, reading nothing. A filter from Python naming a missing column, a meta column
without `with_meta`, or a value of another type gets the same kind of answer before any file is read."""

from __future__ import annotations

import glob
import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app
from lakecore.errors import InvalidInput

runner = CliRunner()


def read(uri: str, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["table", "read", uri, *args])
    return result.exit_code, result.output


def rows(uri: str, *wheres: str) -> list[dict]:
    args = [a for w in wheres for a in ("--where", w)]
    code, out = read(uri, *args, "--format", "json")
    assert code == 0, out
    return sorted((json.loads(line) for line in out.splitlines() if line.strip()), key=lambda r: r["id"])


@pytest.fixture
def orders(tmp_path) -> str:
    uri = str(tmp_path / "orders")
    t = Table.create(uri, schema=pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string()),
                                            ("amount", pa.float64()), ("note", pa.string()),
                                            ("paid", pa.bool_())]),
                     record_key="id", ordering_field="ts", partition_fields=["day"], buckets=1,
                     table_type="copy_on_write")
    t.upsert(pa.table({"id": [1, 2, 3, 4], "ts": [1, 1, 1, 1],
                       "day": ["2026-11-01", "2026-11-01", "2026-11-02", "2026-11-02"],
                       "amount": [5.0, 150.0, 99.5, 1000.0], "note": ["it's", None, "x", "y"],
                       "paid": [True, False, True, False]}))
    return uri


def test_conditions_all_hold(orders) -> None:
    assert [r["id"] for r in rows(orders, "amount > 99.5")] == [2, 4]
    assert [r["id"] for r in rows(orders, "amount >= 99.5", "paid = true")] == [3]
    assert [r["id"] for r in rows(orders, "day in ('2026-11-02', \"2026-11-09\")")] == [3, 4]
    assert [r["id"] for r in rows(orders, "note is null")] == [2]
    assert [r["id"] for r in rows(orders, "note is not null", "id <> 3")] == [1, 4]
    assert [r["id"] for r in rows(orders, "note = 'it''s'")] == [1]   # a quote doubled inside quotes
    assert [r["id"] for r in rows(orders, "`amount` < 10", "id == 1")] == [1]


def test_files_the_condition_rules_out_are_not_read(orders) -> None:
    # the day's file is made unreadable: a read that opened it would fail
    (damaged,) = glob.glob(os.path.join(orders, "day=2026-11-01", "*.parquet"))
    with open(damaged, "wb") as f:
        f.write(b"not parquet")
    code, out = read(orders)
    assert code == 1, out
    assert [r["id"] for r in rows(orders, "day = '2026-11-02'")] == [3, 4]


@pytest.mark.parametrize(("where", "says"), [
    ("amout > 1", "no column 'amout' (did you mean 'amount'?)"),
    ("amount > lots", "lots is not a value of column 'amount' (double)"),
    ("amount ~ 3", "is not COLUMN OP VALUE, COLUMN in (...) or COLUMN is [not] null; e.g. --where"),
    ("day in ()", "'in' needs at least one value"),
    ("_weir_file_name = 'x'", "'_weir_file_name' is a meta column; add --with-meta to filter on it"),
])
def test_a_condition_it_cannot_use_is_answered(orders, where, says) -> None:
    code, out = read(orders, "--where", where)
    assert code == 1
    assert says in " ".join(out.split()), out


def test_a_meta_column_filters_with_with_meta_and_the_commit_time_without(orders) -> None:
    (first,) = [i.requested_time for i in Table.open(orders).timeline().completed]
    assert [r["id"] for r in rows(orders, f"_weir_commit_time = {first}")] == [1, 2, 3, 4]
    assert rows(orders, f"_weir_commit_time > {first}") == []
    code, out = read(orders, "--with-meta", "--columns", "id,_weir_partition_path", "--format", "json",
                     "--where", "_weir_partition_path = 'day=2026-11-01'")
    assert code == 0, out
    assert sorted(json.loads(line)["id"] for line in out.splitlines() if line.strip()) == [1, 2]


@pytest.mark.parametrize(("expr", "says"), [
    (pc.field("amout") > 1, "names no column 'amout' (did you mean 'amount'?)"),
    (pc.field("_weir_file_name") != "x", "no column '_weir_file_name' (a meta column: read with_meta=True"),
    (pc.field("amount") > "x", "does not apply to the table's columns (id: int64, ts: int64, day: string"),
])
def test_a_python_filter_it_cannot_apply_is_answered_before_reading(orders, expr, says) -> None:
    t = Table.open(orders)
    with pytest.raises(InvalidInput) as raised:
        t.scan(filter=expr, columns=["id"])
    assert says in str(raised.value)


def test_python_takes_the_conditions_as_text_too(orders) -> None:
    """`t.read(filter="amount > 99.5")` was refused with pyarrow's "Filter should be array-like": the
    conditions `--where` takes are a filter from Python too (one, or a list that must all hold), and
    skip files as an expression does."""
    t = Table.open(orders)
    ids = lambda table: sorted(table.column("id").to_pylist())   # noqa: E731
    assert ids(t.read(filter="amount > 99.5")) == ids(t.read(filter=pc.field("amount") > 99.5)) == [2, 4]
    assert ids(t.read(filter=["amount >= 99.5", "paid = true"])) == [3]
    assert ids(t.scan(filter=("note is null",), columns=["id"]).to_arrow()) == [2]
    (damaged,) = glob.glob(os.path.join(orders, "day=2026-11-01", "*.parquet"))
    with open(damaged, "wb") as f:
        f.write(b"not parquet")
    assert ids(t.read(filter="day = '2026-11-02'")) == [3, 4]   # the other day's file is not opened
    with pytest.raises(InvalidInput) as raised:
        t.read(filter="amout > 1")
    assert "filter 'amout > 1': no column 'amout' (did you mean 'amount'?)" in str(raised.value)
    with pytest.raises(InvalidInput) as raised:
        t.read(filter="_weir_file_name = 'x'")
    assert "is a meta column; pass with_meta=True to filter on it" in str(raised.value)


def test_and_and_or_join_conditions(orders) -> None:
    """`--where "v = 'A' or v = 'b'"` read as v = "'A' or v = 'b'": 0 rows, exit 0 (and on an integer
    column a baffling "1 and id < 3 is not a value"). `and` binds before `or`; a quoted value, or an
    `in` list, may hold the words."""
    assert [r["id"] for r in rows(orders, "id = 1 or id = 4")] == [1, 4]
    assert [r["id"] for r in rows(orders, "amount > 50 and amount < 500")] == [2, 3]
    assert [r["id"] for r in rows(orders, "id = 1 OR id = 3 AND paid = false")] == [1]
    assert [r["id"] for r in rows(orders, "note = 'x and y' or note = 'it''s'")] == [1]
    assert [r["id"] for r in rows(orders, "day in ('2026-11-02') and id < 4", "note is not null")] == [3]
    t = Table.open(orders)
    assert sorted(t.read(filter="id = 2 or note is null").column("id").to_pylist()) == [2]
    code, out = read(orders, "--where", "id = 1 or")
    assert code == 1 and "a condition is missing beside 'and' or 'or'" in " ".join(out.split()), out
