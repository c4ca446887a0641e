"""insert_overwrite replaces exactly the partitions its input touches; insert_overwrite_table replaces
the whole table (an empty input empties it). Both are one replacecommit: time travel before it reads
the old rows, incremental reads across it return its rows, clean removes the replaced files only
once no retained read needs them, and a reader reading in a loop sees the old state or the new one,
never a mix or a missing file."""

import os
import threading

import pyarrow as pa
import pytest

import lakecore.concurrency.transaction as tx
from lakecore import Table
from lakecore.concurrency import view_of
from lakecore.services import CleanPolicy

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
TYPES = ["merge_on_read", "copy_on_write"]


def batch(ids, dt, v):
    return pa.table({"id": pa.array(ids, pa.int64()), "dt": pa.array([dt] * len(ids), pa.string()),
                     "v": pa.array([v] * len(ids), pa.string())})


def state(t, **kw):
    return sorted((r["dt"], r["id"], r["v"]) for r in t.read(**kw).to_pylist())


def files_of(t, partition):
    return sorted(f for f in os.listdir(os.path.join(t.uri, partition)))


def latest_files(t, partition):
    """The files the latest view reads in a partition."""
    return {f.file_name for s in view_of(t.storage, t.timeline()).slices if s.partition == partition
            for f in s.files}


@pytest.fixture(params=TYPES)
def table(request, tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", partition_fields=["dt"],
                     table_type=request.param, buckets=4)
    t.upsert(pa.concat_tables([batch(range(0, 12), "a", "a1"), batch(range(100, 112), "b", "b1"),
                               batch(range(200, 212), "c", "c1")]))
    t.upsert(batch(range(6, 9), "a", "a2"))  # a second slice or version in a
    return t


def test_insert_overwrite_replaces_exactly_the_partitions_the_input_touches(table):
    before = state(table)
    untouched = {p: files_of(table, p) for p in ("dt=c",)}
    result = table.insert_overwrite(pa.concat_tables([batch([0, 50], "a", "new"), batch([100], "b", "new")]))
    assert result.instant.action == "replacecommit"
    meta = table.commit_metadata(result.instant)
    assert meta.operation == "insert_overwrite"
    assert meta.extra["overwrite"] == {"operation": "insert_overwrite", "partitions": ["dt=a", "dt=b"]}
    # every file group of a and b got a new base (the ones without input rows an empty one)
    assert {(s.partition, s.kind) for s in meta.write_stats} == {("dt=a", "base"), ("dt=b", "base")}
    assert len(meta.write_stats) == 8
    after = state(table)
    assert after == sorted([("a", 0, "new"), ("a", 50, "new"), ("b", 100, "new")]
                           + [r for r in before if r[0] == "c"])
    assert files_of(table, "dt=c") == untouched["dt=c"]  # the other partition is not even rewritten


def test_insert_overwrite_table_replaces_every_partition(table):
    table.insert_overwrite_table(batch([1, 2], "z", "only"))
    assert state(table) == [("z", 1, "only"), ("z", 2, "only")]
    meta = table.commit_metadata(table.timeline().completed[-1])
    assert meta.extra["overwrite"] == {"operation": "insert_overwrite_table", "partitions": None}


def test_insert_overwrite_table_of_an_empty_input_empties_the_table(table):
    table.insert_overwrite_table(batch([], "a", "x"))
    assert table.read().num_rows == 0
    table.upsert(batch([7], "b", "again"))  # the emptied file groups take new writes as usual
    assert state(table) == [("b", 7, "again")]


def test_insert_overwrite_of_an_empty_input_replaces_nothing(table):
    before = state(table)
    table.insert_overwrite(batch([], "a", "x"))
    assert state(table) == before


def test_time_travel_before_the_replacecommit_reads_the_old_rows(table):
    before = state(table)
    last = table.timeline().completed[-1].requested_time
    done = table.insert_overwrite(batch([0], "a", "new")).instant
    assert state(table, as_of=last) == before
    assert state(table, as_of=done.requested_time) == state(table) != before


def test_writes_after_an_overwrite_apply_on_its_rows(table):
    table.insert_overwrite(batch([0, 1], "a", "new"))
    table.upsert(batch([1, 2], "a", "later"))
    assert [r for r in state(table) if r[0] == "a"] == [("a", 0, "new"), ("a", 1, "later"), ("a", 2, "later")]
    if table.config.table_type == "merge_on_read":
        table.maintenance.compact()
        assert [r for r in state(table) if r[0] == "a"] == [("a", 0, "new"), ("a", 1, "later"),
                                                            ("a", 2, "later")]


def test_read_changes_across_an_overwrite_returns_its_rows_and_later_changes(table):
    start = table.timeline().completed[-1].requested_time
    table.insert_overwrite(batch([0, 60], "a", "new"))
    table.upsert(batch([100], "b", "b2"))
    changes = table.read_changes(start)
    got = sorted((r["dt"], r["id"], r["v"], r["_weir_op"]) for r in changes.to_pylist())
    assert got == [("a", 0, "new", "upsert"), ("a", 60, "new", "upsert"), ("b", 100, "b2", "upsert")]
    # a range that ends before the overwrite does not see it
    first = table.timeline().completed[0].requested_time
    assert "new" not in {r["v"] for r in table.read_changes(first, start).to_pylist()}


def test_clean_removes_replaced_files_only_past_retention(table):
    replaced = latest_files(table, "dt=a")
    before = state(table)
    last = table.timeline().completed[-1].requested_time
    table.insert_overwrite(batch([0], "a", "new"))
    # the overwrite is the newest of 2 retained commits: the view before it must stay readable
    table.maintenance.clean(CleanPolicy("keep_latest_commits", 2), dry_run=False)
    assert replaced <= set(files_of(table, "dt=a"))
    assert state(table, as_of=last) == before
    table.upsert(batch([100], "b", "b2"))
    plan = table.maintenance.clean(CleanPolicy("keep_latest_commits", 2)).plan
    assert {os.path.basename(f) for f in plan.files if f.startswith("dt=a/")} == replaced
    table.maintenance.clean(CleanPolicy("keep_latest_commits", 2), dry_run=False)
    assert replaced.isdisjoint(files_of(table, "dt=a"))
    assert [r for r in state(table) if r[0] == "a"] == [("a", 0, "new")]


def test_a_reader_in_a_loop_sees_the_old_or_the_new_state_never_a_mix(table, monkeypatch):
    old = state(table)
    new = sorted([("a", 0, "new"), ("a", 1, "new")] + [r for r in old if r[0] != "a"])
    seen: list[list] = []
    errors: list[BaseException] = []
    stop = threading.Event()
    reads_before_commit = threading.Event()

    def reader():
        while not stop.is_set():
            try:
                seen.append(state(table))
            except BaseException as exc:  # a missing file would show here
                errors.append(exc)
                return
            if len(seen) >= 3:
                reads_before_commit.set()

    real_commit = tx.commit_write

    def commit_after_reads(*a, **kw):  # the overwrite's files are written: let the reader run first
        assert reads_before_commit.wait(60)
        return real_commit(*a, **kw)

    monkeypatch.setattr("lakecore.table.writer.commit_write", commit_after_reads)
    thread = threading.Thread(target=reader)
    thread.start()
    try:
        table.insert_overwrite(batch([0, 1], "a", "new"))
        n = len(seen)
        while len(seen) < n + 3 and not errors and thread.is_alive():
            stop.wait(0.01)
    finally:
        stop.set()
        thread.join(60)
    assert not errors
    assert all(s in (old, new) for s in seen)
    assert seen[0] == old and seen[-1] == new


def test_rolling_back_the_latest_overwrite_brings_the_replaced_partitions_back(table):
    before = state(table)
    done = table.insert_overwrite_table(batch([0], "a", "new")).instant
    table.maintenance.rollback(done.requested_time, dry_run=False)
    assert state(table) == before
    assert all(i.action != "replacecommit" for i in table.timeline().completed)


@pytest.mark.parametrize("table_type", TYPES)
def test_on_a_partial_update_table_an_overwrite_replaces_whole_rows(tmp_path, table_type):
    from lakecore import ColumnGroup

    schema = pa.schema([("id", pa.int64()), ("a", pa.string()), ("ta", pa.int64()), ("b", pa.string()),
                        ("tb", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="id", table_type=table_type,
                     column_groups=[ColumnGroup("ga", ("a",), "ta"), ColumnGroup("gb", ("b",), "tb")])
    t.upsert(pa.table({"id": [1, 2], "a": ["a1", "a2"], "ta": [1, 1]}))
    t.upsert(pa.table({"id": [1, 2], "b": ["b1", "b2"], "tb": [9, 9]}))
    t.insert_overwrite_table(pa.table({"id": [2], "a": ["A2"], "ta": [0]}))  # older ordering: still wins
    assert t.read().to_pylist() == [{"id": 2, "a": "A2", "ta": 0, "b": None, "tb": None}]
    t.upsert(pa.table({"id": [2], "b": ["B2"], "tb": [0]}))  # group b starts afresh: any ordering is newer
    assert t.read().to_pylist() == [{"id": 2, "a": "A2", "ta": 0, "b": "B2", "tb": 0}]
