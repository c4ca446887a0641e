"""A new base file of a routed group's rows (a bulk insert into empty groups, an overwrite) is written a
row group at a time: each row group's rows are gathered from the input as the Parquet writer asks for
them, so a task never holds its whole group, and the file is the one the whole gather wrote (the same
rows, row groups, encodings and statistics). Rows that need merging as a whole (duplicate keys) take
the whole path. The row-group size is made small here so that a few thousand rows are many groups."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lakecore.write.file_writer as file_writer
from lakecore import Table
from lakecore.config import COMMIT_TIME, OP, OP_DELETE
from lakecore.write import combine_and_route

ROW_GROUP = 400
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("name", pa.string()), ("x", pa.float64()),
                    ("at", pa.timestamp("us")), ("price", pa.decimal128(9, 2)), ("day", pa.string())])


@pytest.fixture
def small_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("lakecore.write.file_writer.ROW_GROUP_ROWS", ROW_GROUP)
    monkeypatch.setattr("lakecore.formats.parquet.ROW_GROUP_ROWS", ROW_GROUP)


def rows(n: int, seed: int = 7, *, chunks: int = 3) -> pa.Table:
    """n rows with unique ids, nulls, NaNs, long strings and types whose bounds the footer does not give,
    in several chunks (what numpy's conversion of a large input gives)."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n * 3)[:n]
    x = rng.normal(size=n)
    x[rng.random(n) < 0.05] = np.nan
    names = [None if i % 17 == 0 else ("n" * 80 if i % 101 == 0 else f"name-{i % 997}") for i in range(n)]
    start = datetime(2026, 1, 1)
    table = pa.table({
        "id": ids, "ts": rng.integers(0, 1_000, n), "name": pa.array(names, pa.string()), "x": x,
        "at": pa.array([start + timedelta(seconds=int(s)) for s in rng.integers(0, 10**6, n)],
                       pa.timestamp("us")),
        "price": pa.array([Decimal(int(p)) / 100 for p in rng.integers(0, 10**6, n)], pa.decimal128(9, 2)),
        "day": pa.array([f"d{i % 3}" for i in range(n)], pa.string()),
    }, schema=SCHEMA)
    step = -(-n // chunks)
    return pa.Table.from_batches([b for i in range(0, n, step) for b in table.slice(i, step).to_batches()])


def base_files(uri: str) -> list[Path]:
    return sorted(p for p in Path(uri).rglob("*.parquet") if ".weir" not in p.parts)


def newest(table: Table) -> list[Path]:
    """The base files of the table's latest write."""
    instant = table.timeline().completed[-1].requested_time
    return [p for p in base_files(table.uri) if instant in p.name]


def file_view(path: Path) -> tuple:
    """A data file as it matters: its rows (but the commit time, which differs between two writes),
    its row groups' sizes and each column's encodings and codec."""
    f = pq.ParquetFile(path)
    md = f.metadata
    layout = [(md.row_group(i).num_rows, [(md.row_group(i).column(j).path_in_schema,
                                           md.row_group(i).column(j).encodings,
                                           md.row_group(i).column(j).compression)
                                          for j in range(md.num_columns)]) for i in range(md.num_row_groups)]
    return f.read().drop_columns([COMMIT_TIME]), layout


def write_both(tmp_path: Path, data: pa.Table, monkeypatch: pytest.MonkeyPatch,
               **create) -> tuple[Table, Table, list, list]:
    """The same bulk insert into two new tables: row group by row group, and with the whole gather;
    the tables and each one's write stats."""
    operation = create.pop("operation", "bulk_insert")

    def write(name: str) -> tuple[Table, list]:
        table = Table.create(str(tmp_path / name), schema=data.schema, **create)
        if operation != "bulk_insert":  # over rows already there (other keys, the same partitions)
            table.bulk_insert(rows(3_000, seed=11).set_column(0, "id", pa.array(range(10**6, 10**6 + 3_000))))
        return table, table.write(data, operation).stats

    taken: list[object] = []
    choose = file_writer._gathered
    with monkeypatch.context() as m:
        m.setattr(file_writer, "_gathered", lambda ctx, group: taken.append(choose(ctx, group)) or taken[-1])
        gathered, gathered_stats = write("gathered")
    assert taken and all(t is not None for t in taken[-len(gathered_stats):]), "the gathered path was taken"
    with monkeypatch.context() as m:
        m.setattr(file_writer, "_gathered", lambda ctx, group: None)
        whole, whole_stats = write("whole")
    return gathered, whole, comparable(gathered_stats), comparable(whole_stats)


def comparable(stats) -> list[tuple]:
    """Write stats but their instant (in file names and the replaced base's) and the commit time's
    statistics: an overwrite's base replaces no base (its slice holds this write's rows only)."""
    return sorted((s.partition, s.file_id, s.kind, s.records, s.deletes, s.bytes, s.base_instant is None,
                   str({k: v for k, v in s.stats["columns"].items() if k != COMMIT_TIME}), s.stats["rows"])
                  for s in stats)


def same_rows(a: pa.Table, b: pa.Table) -> bool:
    """Equal, NaN equal to NaN (Arrow's `equals` holds NaN unequal to itself)."""
    def filled(t: pa.Table) -> pa.Table:
        return t.set_column(t.column_names.index("x"), "x", pc.if_else(pc.is_nan(t.column("x")), -1e300,
                                                                       t.column("x")))
    return filled(a).equals(filled(b))


@pytest.mark.parametrize("create", [
    {"record_key": "id", "ordering_field": "ts", "buckets": 2},
    {"record_key": "id", "ordering_field": "ts", "buckets": 3, "partition_fields": ["day"]},
    {"record_key": "id", "buckets": 2, "table_type": "copy_on_write", "compression": "lz4"},
    {"record_key": "id", "ordering_field": "ts", "buckets": 2, "partition_fields": ["day"],
     "operation": "insert_overwrite"},
    {"record_key": "id", "buckets": 2, "table_type": "copy_on_write", "operation": "insert_overwrite_table"},
])
def test_the_file_is_the_one_the_whole_gather_wrote(tmp_path, monkeypatch, small_row_groups, create) -> None:
    data = rows(9_000)
    gathered, whole, gathered_stats, whole_stats = write_both(tmp_path, data, monkeypatch, **create)
    assert len(base_files(gathered.uri)) == len(base_files(whole.uri)) >= 2
    for a, b in zip(newest(gathered), newest(whole), strict=True):
        got, want = file_view(a), file_view(b)
        assert got[1] == want[1], f"{a.name}: row groups and encodings differ"
        assert len(got[1]) >= 2, "more than one row group"
        assert same_rows(got[0], want[0]), f"{a.name}: rows differ"
    assert gathered_stats == whole_stats
    assert same_rows(gathered.read().sort_by("id"), whole.read().sort_by("id"))
    assert gathered.read().num_rows == data.num_rows


def test_a_task_never_holds_its_whole_group(tmp_path, monkeypatch) -> None:
    """Arrow memory at its peak during a bulk insert of 1M rows into 2 groups (both written at once on
    2 threads): each group's keys (to check they are unique), one row group's rows per task and the
    Parquet writer's buffers, where the whole gather held every row again (1.7x the input)."""
    monkeypatch.setattr("lakecore.write.file_writer.ROW_GROUP_ROWS", 10_000)
    monkeypatch.setattr("lakecore.formats.parquet.ROW_GROUP_ROWS", 10_000)
    n = 1_000_000
    rng = np.random.default_rng(1)
    data = pa.table({"id": rng.permutation(n), "ts": rng.integers(0, 9, n), "x": rng.random(n),
                     "y": rng.random(n), **{s: pa.array(np.char.add(s, rng.integers(0, 10**7, n).astype(str)))
                                            for s in ("s", "t")}})
    table = Table.create(str(tmp_path / "t"), schema=data.schema, record_key="id", ordering_field="ts",
                         buckets=2)
    default = pa.default_memory_pool()
    counted = pa.proxy_memory_pool(default)
    pa.set_memory_pool(counted)
    try:
        table.bulk_insert(data)
    finally:
        pa.set_memory_pool(default)
    assert table.read().num_rows == n
    peak = counted.max_memory()
    assert peak < data.nbytes / 3, f"peak {peak:,} bytes of Arrow memory against the input's {data.nbytes:,}"


def test_rows_that_need_merging_take_the_whole_path(tmp_path, small_row_groups) -> None:
    """Duplicate keys in one bulk insert are precombined over the whole group: the latest ordering wins."""
    data = rows(6_000)
    dup = data.slice(0, 2_500).set_column(1, "ts", pa.array(np.full(2_500, 5_000), pa.int64()))
    table = Table.create(str(tmp_path / "t"), schema=data.schema, record_key="id", ordering_field="ts",
                         buckets=2)
    table.bulk_insert(pa.concat_tables([data, dup]))
    got = table.read().sort_by("id")
    assert got.num_rows == data.num_rows
    winners = got.filter(pc.is_in(got.column("id"), dup.column("id")))
    assert set(winners.column("ts").to_pylist()) == {5_000}


def test_a_null_key_is_refused_as_before(tmp_path, small_row_groups) -> None:
    data = rows(5_000)
    ids = data.column("id").to_pylist()
    ids[4_321] = None
    bad = data.set_column(0, "id", pa.array(ids, pa.int64()))
    table = Table.create(str(tmp_path / "t"), schema=data.schema, record_key="id", buckets=2)
    with pytest.raises(Exception, match="null"):
        table.bulk_insert(bad)
    assert table.read().num_rows == 0
    assert base_files(table.uri) == []


def test_whether_a_write_holds_upserts_only_is_decided_for_all_its_groups(tmp_path) -> None:
    """One delete anywhere in a write's input keeps every group of it off the gathered path, also the
    groups it does not reach; a merge-on-read upsert (written to logs) never takes it."""
    data = rows(2_000)
    table = Table.create(str(tmp_path / "t"), schema=data.schema, record_key="id", buckets=4)
    ops = np.zeros(data.num_rows, np.int8)
    groups = combine_and_route(data.append_column(OP, pa.array(ops)), table.config, "bulk_insert")
    assert len(groups) == 4 and all(g.upserts_only for g in groups)
    ops[-1] = OP_DELETE
    groups = combine_and_route(data.append_column(OP, pa.array(ops)), table.config, "bulk_insert")
    assert len(groups) == 4 and not any(g.upserts_only for g in groups)
    groups = combine_and_route(data.append_column(OP, pa.array(ops * 0)), table.config, "upsert")
    assert groups and not any(g.upserts_only for g in groups)
