"""DuckDB and Polars query a Weir table in-process through the Arrow C stream of its scan (the scan's
RecordBatchReader, or the scan itself), and see exactly the rows `Table.read` returns."""

from __future__ import annotations

import importlib.util

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.lakecore.table.scan_tables import merge_on_read_table
from tests.support.fixtures import require


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return merge_on_read_table(str(tmp_path_factory.mktemp("engines") / "t"))


def by_id(t: pa.Table) -> pa.Table:
    return t.take(pc.sort_indices(t, [("id", "ascending")]))


def test_duckdb_queries_a_scan(table):
    require("duckdb", None if importlib.util.find_spec("duckdb") else "the duckdb package is not installed "
            "(pip install -e '.[test]')")
    import duckdb

    con = duckdb.connect()
    reader = table.scan().to_arrow_batch_reader()  # noqa: F841 - DuckDB finds it by its name
    got = con.sql("SELECT * FROM reader").fetch_arrow_table()
    assert by_id(got).equals(by_id(table.read()))

    scan = table.scan(columns=["id", "part", "value"])  # noqa: F841
    counts = con.sql("SELECT part, count(*) AS n, sum(value) AS total FROM scan GROUP BY part ORDER BY part")
    expected = table.read().group_by("part").aggregate([("id", "count"), ("value", "sum")]).sort_by("part")
    assert counts.fetchall() == list(zip(expected["part"].to_pylist(), expected["id_count"].to_pylist(),
                                         expected["value_sum"].to_pylist(), strict=True))


def test_polars_reads_a_scan(table):
    import polars as pl

    expected = by_id(table.read())
    from_reader = pl.from_arrow(table.scan().to_arrow_batch_reader())
    assert isinstance(from_reader, pl.DataFrame)
    assert by_id(from_reader.to_arrow().cast(expected.schema)).equals(expected)
    from_scan = pl.DataFrame(table.scan(filter=pc.field("ts") >= 2))
    newer = table.read(filter=pc.field("ts") >= 2)
    assert from_scan.height == newer.num_rows > 0
    assert sorted(from_scan["id"].to_list()) == sorted(newer["id"].to_pylist())


def test_a_polars_frame_is_written_as_it_is(tmp_path):
    """Polars hands its strings and bytes over as string_view and binary_view: a write of a DataFrame
    with a string column failed "type string_view cannot be stored", though polars is a write input."""
    import polars as pl

    from lakecore import Table

    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("name", pa.string()),
                                                             ("raw", pa.binary())]), record_key="id")
    t.upsert(pl.DataFrame({"id": [1, 2], "name": ["ada", None], "raw": [b"x", b""]}))
    assert by_id(t.read()).to_pylist() == [{"id": 1, "name": "ada", "raw": b"x"},
                                           {"id": 2, "name": None, "raw": b""}]
    assert t.read().schema.field("name").type == pa.string()
