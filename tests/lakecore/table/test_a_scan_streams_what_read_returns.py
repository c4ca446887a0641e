"""`Table.scan` streams exactly the rows `Table.read` returns (a merge-on-read table with logs, every
kind of query), in the schema `read` has, and `read` is what the whole-table merge of every slice gives."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakecore import InvalidInput, Table
from lakecore.concurrency import view_of
from lakecore.read.slices import merge_columns
from lakecore.read.snapshot import finish, read_slices
from tests.lakecore.table.scan_tables import SCHEMA, merge_on_read_table

QUERIES = {
    "all": {},
    "columns": {"columns": ["name", "id"]},
    "filter": {"filter": pc.field("value") > 100.0},
    "filter on a column not returned": {"columns": ["id"], "filter": pc.field("ts") >= 2},
    "partitions": {"partitions": {"part": ["a", "c"]}},
    "meta": {"with_meta": True},
    "a meta column": {"columns": ["_weir_file_name", "id"]},
    "read optimized": {"query": "read_optimized"},
}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    return merge_on_read_table(str(tmp_path_factory.mktemp("scan") / "t"))


def sorted_rows(t: pa.Table) -> pa.Table:
    key = "id" if "id" in t.column_names else t.column_names[0]
    return t.take(pc.sort_indices(t, [(key, "ascending")]))


@pytest.mark.parametrize("query", QUERIES.values(), ids=list(QUERIES))
def test_a_scan_streams_what_read_returns(table, query):
    read = table.read(**query)
    scan = table.scan(**query)
    batches = list(scan.to_batches())
    assert scan.schema == read.schema
    assert pa.Table.from_batches(batches, schema=scan.schema).equals(read)
    assert table.scan(**query).to_arrow_batch_reader().read_all().equals(read)
    assert table.scan(**query).to_arrow().equals(read)


def test_read_equals_one_merge_of_all_slices(table):
    """What `read` returned before it streamed: every slice merged at once, then finished."""
    view = view_of(table.storage, table.timeline())
    merged = read_slices(table.storage, table.config, list(view.slices), merge_columns(table.config, None),
                         meta=True)
    whole = finish(merged, table.config, columns=None, filter=None, with_meta=True)
    assert sorted_rows(table.read(with_meta=True)).equals(sorted_rows(whole))
    assert table.read().num_rows == 400 - len(range(1, 400, 7)) + 50


def test_a_scan_as_of_an_instant_reads_that_instant(table):
    first = table.timeline().completed[0].requested_time
    scan = table.scan(as_of=first)
    assert scan.to_arrow().equals(table.read(as_of=first))
    assert scan.to_arrow().num_rows == 400


def test_a_scan_is_planned_when_made_and_read_when_consumed(table, tmp_path):
    t = Table.create(str(tmp_path / "empty"), schema=SCHEMA, record_key="id", ordering_field="ts")
    empty = t.scan(columns=["id", "name"])
    assert list(empty.to_batches()) == []
    assert empty.to_arrow_batch_reader().read_all().equals(t.read(columns=["id", "name"]))
    assert empty.schema == pa.schema([("id", pa.int64()), ("name", pa.string())])
    with pytest.raises(InvalidInput, match="unknown column"):
        table.scan(columns=["nope"])
