"""Data skipping: `Table.read(filter=...)` leaves unread the file slices whose files' column statistics
(recorded in each write stat) say no row can match, for filters on any column, and returns exactly
the unfiltered read filtered: over random histories of upserts, deletes, late events, compaction and
clustering, where a key's base row and its newer version in a log fall on different sides of the
filter. The files opened are counted on the real local filesystem."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakecore import Table
from lakecore.layout import parse_data_file_name
from lakecore.services.clustering_plan import ClusteringStrategy
from tests.support.read_counting import CountingStorage

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64()), ("ts", pa.int64()),
                    ("f", pa.float64()), ("s", pa.string())])
v, f, s = pc.field("v"), pc.field("f"), pc.field("s")
FILTERS = [
    v < 1000, (v >= 2000) & (v < 2010), v == 3500, v.isin([5, 2500, 99_999]), v.is_null(), ~(v < 3000),
    (v < 100) | (s == "x7"), f > 0.5, f.is_nan(), f != 0.25, s >= "x9", pc.field("ts") > 40,
    (v < 1000) & (pc.field("p") == "p0"),
]


def _table(tmp_path, mode: str) -> tuple[Table, CountingStorage]:
    created = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", partition_fields=["p"],
                           buckets=2, ordering_field="ts" if mode == "event_time" else None)
    storage = CountingStorage(created.uri)
    return Table(storage, created.config), storage


def _rows(ids: np.ndarray, rng: np.random.Generator, ts: int) -> pa.Table:
    part = ids % 4
    values = part * 1000 + rng.integers(0, 1000, len(ids))
    floats = rng.random(len(ids))
    floats[rng.random(len(ids)) < 0.1] = np.nan
    return pa.table({
        "id": pa.array(ids, pa.int64()), "p": pa.array([f"p{x}" for x in part], pa.string()),
        "v": pa.array(values, pa.int64(), mask=rng.random(len(ids)) < 0.05),
        "ts": pa.array(rng.integers(ts - 20, ts + 1, len(ids)), pa.int64()),
        "f": pa.array(floats, pa.float64(), mask=rng.random(len(ids)) < 0.05),
        "s": pa.array([f"x{x}" for x in rng.integers(0, 10, len(ids))], pa.string()),
    }, schema=SCHEMA)


def _canonical(t: pa.Table) -> list[tuple]:
    rows = t.sort_by("id").to_pylist()
    return [tuple("NaN" if isinstance(x, float) and math.isnan(x) else x for x in r.values()) for r in rows]


def _check_every_filter(table: Table) -> None:
    whole = table.read()
    for expr in FILTERS:
        assert _canonical(table.read(filter=expr)) == _canonical(whole.filter(expr)), str(expr)
    ro = table.read(query="read_optimized")
    for expr in FILTERS:
        assert _canonical(table.read(filter=expr, query="read_optimized")) == _canonical(ro.filter(expr))


@pytest.mark.parametrize("mode", ["commit_time", "event_time"])
def test_a_filtered_read_is_the_unfiltered_read_filtered_over_random_histories(tmp_path, mode) -> None:
    rng = np.random.default_rng(24 if mode == "commit_time" else 27)
    table, _ = _table(tmp_path, mode)
    table.bulk_insert(_rows(np.arange(400), rng, 10))
    _check_every_filter(table)
    for step in range(10):
        kind = rng.choice(["upsert", "upsert", "delete", "compact", "cluster"])
        if kind == "upsert":  # some keys move to another value range, some events arrive late
            table.upsert(_rows(rng.choice(600, 40, replace=False), rng, 10 + 5 * step))
        elif kind == "delete":
            table.delete(pa.table({"id": pa.array(rng.choice(600, 20, replace=False), pa.int64()),
                                   "p": pa.array([f"p{x % 4}" for x in rng.choice(600, 20)], pa.string())}))
        elif kind == "compact":
            table.maintenance.compact()
        else:
            table.maintenance.cluster(ClusteringStrategy(kind="all", sort_columns=("v",), row_group_rows=16))
        _check_every_filter(table)


def test_a_filter_on_a_data_column_opens_only_the_slices_that_may_match(tmp_path) -> None:
    rng = np.random.default_rng(1)
    table, storage = _table(tmp_path, "commit_time")
    table.bulk_insert(_rows(np.arange(400), rng, 10))  # partition pK holds v in [K*1000, K*1000+999]
    storage.reset()
    got = table.read(filter=v < 1000)
    assert set(got.column("p").to_pylist()) == {"p0"}
    assert storage.opened and all(p.startswith("p=p0/") for p in storage.opened), storage.opened

    # key 2 (partition p2) gets v = 5 in a log: its slice may match now, the other p2 slice may not
    moved = pa.table({"id": [2], "p": ["p2"], "v": [5], "ts": [11], "f": [0.0], "s": ["x0"]}, schema=SCHEMA)
    table.upsert(moved)
    storage.reset()
    got = table.read(filter=v < 1000)
    assert 2 in got.column("id").to_pylist()
    p2 = {parse_data_file_name(p.split("/")[1]).file_id for p in storage.opened if p.startswith("p=p2/")}
    assert len(p2) == 1 and not any(p.startswith(("p=p1/", "p=p3/")) for p in storage.opened)

    # key 0's newer version leaves the range: its slice is still read, and the old version not shown
    table.upsert(pa.table({"id": [0], "p": ["p0"], "v": [900_000], "ts": [12], "f": [0.0], "s": ["x0"]},
                          schema=SCHEMA))
    table.delete(pa.table({"id": [2], "p": ["p2"]}))
    got = table.read(filter=v < 1000)
    assert not {0, 2} & set(got.column("id").to_pylist())
    assert _canonical(got) == _canonical(table.read().filter(v < 1000))


def test_a_clustered_base_file_reads_only_the_row_groups_that_may_match(tmp_path) -> None:
    rng = np.random.default_rng(2)
    table, storage = _table(tmp_path, "commit_time")
    table.bulk_insert(_rows(np.arange(80_000), rng, 10))
    table.maintenance.cluster(ClusteringStrategy(kind="all", sort_columns=("v",), row_group_rows=1000))
    storage.reset()
    table.read()
    everything = storage.bytes_read
    storage.reset()
    got = table.read(filter=(v >= 1000) & (v < 1010))
    assert storage.bytes_read < everything / 5, (storage.bytes_read, everything)
    assert _canonical(got) == _canonical(table.read().filter((v >= 1000) & (v < 1010)))
