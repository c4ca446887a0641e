"""Routing gives each file group exactly its rows, in input order, whichever way it finds them (a task's
own pass over the codes for a few groups, one stable sort for many), and a group's gather takes a
column of several chunks chunk by chunk: Arrow's take concatenates such a column first, which copied
the whole input column once per file group."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore import Table
from lakecore.write.routing import CodeRows, file_group_codes, route, take_ascending

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("s", pa.string()), ("x", pa.float64())])


def chunked(values: list, type_: pa.DataType, cuts: list[int]) -> pa.ChunkedArray:
    bounds = sorted({0, len(values), *[c % (len(values) + 1) for c in cuts]})
    return pa.chunked_array([pa.array(values[a:b], type_) for a, b in pairwise(bounds)] or
                            [pa.array([], type_)], type=type_)


def table_of(rows: list[tuple], cuts: list[int]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [[] for _ in SCHEMA]
    arrays = [chunked(list(c), f.type, cuts) for c, f in zip(columns, SCHEMA, strict=True)]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


rows_st = st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from(["d1", "d2", "d3"]),
                             st.one_of(st.none(), st.text(max_size=5)),
                             st.one_of(st.none(), st.floats(allow_nan=False))),
                   min_size=1, max_size=80)


@settings(max_examples=150, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 100), max_size=5), data=st.data())
def test_take_ascending_equals_take_and_keeps_the_chunks(rows, cuts, data):
    source = table_of(rows, cuts)
    picked = data.draw(st.lists(st.integers(0, len(rows) - 1), unique=True))
    positions = np.array(sorted(picked), dtype=np.int64)
    taken = take_ascending(source, positions)
    assert taken.schema == source.schema
    assert taken.to_pylist() == source.take(positions).to_pylist()
    # a column is taken chunk by chunk: one piece per source chunk its positions fall in
    for col, out in zip(source.columns, taken.columns, strict=True):
        if col.num_chunks > 1:
            starts = np.r_[0, np.cumsum([len(c) for c in col.chunks])]
            hit = len(np.unique(np.searchsorted(starts, positions, side="right"))) if len(positions) else 0
            assert out.num_chunks == hit


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables")
    out = {}
    for parted in (False, True):
        for buckets in (1, 2, 4, 16):
            out[(parted, buckets)] = Table.create(
                str(root / f"{parted}-{buckets}"), schema=SCHEMA, record_key="id", ordering_field="x",
                partition_fields=("day",) if parted else (), buckets=buckets).config
    return out


@settings(max_examples=100, deadline=None)
@given(rows=rows_st, cuts=st.lists(st.integers(0, 100), max_size=3), parted=st.booleans(),
       buckets=st.sampled_from([1, 2, 4, 16]))
def test_each_group_gets_its_rows_in_input_order(configs, rows, cuts, parted, buckets):
    config = configs[(parted, buckets)]
    source = table_of(rows, cuts)
    codes, paths = file_group_codes(source, config)
    groups = route(source, config)
    assert len({(g.partition, g.file_id) for g in groups}) == len(groups)
    assert sum(g.num_rows for g in groups) == source.num_rows
    for g in groups:
        code = paths.index(g.partition) * config.buckets + int(g.file_id)
        assert g.rows.to_pylist() == source.take(np.flatnonzero(codes == code)).to_pylist()
        assert g.rows.num_rows == g.num_rows
        if len(groups) == 1:
            assert g.positions is None
        else:  # a few groups find their own rows; many share one sort
            assert isinstance(g.positions, CodeRows) == (len(groups) <= 8)
