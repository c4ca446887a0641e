"""A merge-on-read write precombines each partition's rows once, before routing; the file groups'
rows must be exactly what precombining each file group's rows on its own gives (the task-side
path, which Spark tasks and copy-on-write writes still take)."""

from __future__ import annotations

from collections import Counter, defaultdict

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore import ColumnGroup, Table
from lakecore.config import COMMIT_TIME
from lakecore.merge import precombine
from lakecore.read.spec import file_schema, merge_spec
from lakecore.write import combine_and_route, conform, route

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("a", pa.int64()), ("a_ts", pa.int64()),
                    ("b", pa.string()), ("b_ts", pa.int64())])
KINDS = ("event_time", "commit_time", "partial_update")


def options(kind: str, parted: bool) -> dict:
    if kind == "event_time":
        return dict(ordering_field="a_ts")
    if kind == "partial_update":  # "day" is a partition field or a column of the first group
        return dict(column_groups=[ColumnGroup("ga", ("a",) if parted else ("a", "day"), "a_ts"),
                                   ColumnGroup("gb", ("b",), "b_ts")])
    return {}


@pytest.fixture(scope="module")
def configs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tables")
    return {(kind, parted): Table.create(str(root / f"{kind}-{parted}"), schema=SCHEMA, record_key="id",
                                         partition_fields=("day",) if parted else (), buckets=4,
                                         **options(kind, parted)).config
            for kind in KINDS for parted in (False, True)}


rows_st = st.lists(st.tuples(st.integers(0, 12), st.sampled_from(["d1", "d2", "d3"]), st.integers(-5, 5),
                             st.integers(0, 3), st.sampled_from(["x", "y", None]), st.integers(0, 3)),
                   min_size=1, max_size=60)


def as_multiset(groups):
    out: defaultdict = defaultdict(Counter)
    for g in groups:
        rows = g.rows.drop_columns([COMMIT_TIME]) if COMMIT_TIME in g.rows.column_names else g.rows
        out[(g.partition, g.file_id)] += Counter(tuple(sorted(r.items())) for r in rows.to_pylist())
    return out


@settings(max_examples=60, deadline=None)
@given(rows=rows_st, kind=st.sampled_from(KINDS), parted=st.booleans(),
       drop_b=st.booleans())
def test_batch_precombine_equals_per_group_precombine(configs, rows, kind, parted, drop_b):
    config = configs[(kind, parted)]
    batch = pa.Table.from_pylist([dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA)
    if drop_b and kind == "partial_update":  # a stream that carries only one column group
        batch = batch.drop_columns(["b", "b_ts"])
    conformed = conform(batch, config, "upsert").rows
    combined = combine_and_route(conformed, config, "upsert")
    assert all(g.combined for g in combined)
    spec, schema = merge_spec(config), file_schema(config)
    per_group = []
    for g in route(conformed, config):
        with_time = g.rows.append_column(COMMIT_TIME, pa.array([0] * g.rows.num_rows, pa.int64())) \
            if COMMIT_TIME not in g.rows.column_names else g.rows
        per_group.append(type(g)(g.partition, g.file_id, precombine(with_time, spec, schema)))
    assert as_multiset(combined) == as_multiset(per_group)


def test_one_key_in_two_partitions_stays_two_records(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", partition_fields=("day",),
                     ordering_field="a_ts")
    t.upsert(pa.table({"id": [1, 1, 1, 2], "day": ["d1", "d2", "d1", "d1"], "a": [10, 20, 11, 30],
                       "a_ts": [1, 1, 2, 1], "b": ["p", "q", "r", "s"], "b_ts": [0, 0, 0, 0]}, schema=SCHEMA))
    got = sorted(t.read(columns=["id", "day", "a", "b"]).to_pylist(), key=lambda r: (r["id"], r["day"]))
    assert got == [{"id": 1, "day": "d1", "a": 11, "b": "r"}, {"id": 1, "day": "d2", "a": 20, "b": "q"},
                   {"id": 2, "day": "d1", "a": 30, "b": "s"}]
