"""Optimistic and non-blocking concurrency control at commit time, with writers interleaved by hand
through the split write API (begin on the driver, tasks write, commit)."""

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.concurrency import begin_write, commit_write
from lakecore.errors import WriteConflict
from lakecore.layout import bucket_file_id
from lakecore.layout.murmur3 import bucket_of  # the hash of new tables
from lakecore.write import conform, route, write_file_group

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def keys_in_bucket(bucket: int, n: int, buckets: int = 4) -> list[int]:
    ids = pa.array(range(2000), pa.int64())
    of = bucket_of([ids], buckets).tolist()
    return [k for k, b in zip(ids.to_pylist(), of, strict=True) if b == bucket][:n]


def start(t: Table, ids: list[int], tag: str, op: str = "upsert"):
    data = pa.table({"id": pa.array(ids, pa.int64()), "ts": [1] * len(ids), "v": [tag] * len(ids)})
    txn = begin_write(t.storage, t.config, t.lock, op, need_view=True)
    groups = route(conform(data, t.config, op).rows, t.config)
    stats = [s for g in groups for s in write_file_group(txn.context(), g)]
    return txn, stats


def data_files(t: Table) -> set[str]:
    import os
    return {f for d, _, fs in os.walk(t.uri) if "/.weir" not in d for f in fs}


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_disjoint_file_groups_never_abort(tmp_path, table_type):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", table_type=table_type)
    a = start(t, keys_in_bucket(0, 5), "a")
    b = start(t, keys_in_bucket(1, 5), "b")
    commit_write(*b, lock=t.lock)
    commit_write(*a, lock=t.lock)
    assert t.read().num_rows == 10


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_overlapping_file_group_aborts_the_later_committer_and_rolls_it_back(tmp_path, table_type):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", table_type=table_type)
    shared = keys_in_bucket(2, 6)
    a_txn, a_stats = start(t, shared[:3] + keys_in_bucket(3, 2), "a")
    b_txn, b_stats = start(t, shared[3:], "b")
    commit_write(b_txn, b_stats, lock=t.lock)
    with pytest.raises(WriteConflict) as err:
        commit_write(a_txn, a_stats, lock=t.lock)
    msg = str(err.value)
    assert a_txn.instant.requested_time in msg and b_txn.instant.requested_time in msg
    assert bucket_file_id(2) in msg and "retry" in msg
    (conflict,) = err.value.conflicts
    assert conflict.file_groups == {("", bucket_file_id(2))}
    # nothing of the loser is visible or left behind; the winner's rows are intact
    assert sorted(r["v"] for r in t.read().to_pylist()) == ["b"] * 3
    assert t.timeline().pending == ()
    assert {s.file_name for s in a_stats}.isdisjoint(data_files(t))
    assert [i.action for i in t.timeline().completed] == ["deltacommit" if table_type == "merge_on_read"
                                                          else "commit", "rollback"]


def test_a_commit_that_finished_before_we_started_is_no_conflict(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    ids = keys_in_bucket(0, 4)
    commit_write(*start(t, ids[:2], "first"), lock=t.lock)
    commit_write(*start(t, ids[2:], "second"), lock=t.lock)
    assert t.read().num_rows == 4


def test_non_blocking_writers_never_conflict_on_log_appends(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts",
                     concurrency_mode="non_blocking")
    shared = keys_in_bucket(1, 4)
    a = start(t, shared, "a")
    b = start(t, shared, "b")
    commit_write(*b, lock=t.lock)
    commit_write(*a, lock=t.lock)  # completes later: wins ties under event time (ts equal)
    assert {r["v"] for r in t.read().to_pylist()} == {"a"}


def test_non_blocking_bulk_inserts_into_the_same_empty_file_group_conflict(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", concurrency_mode="non_blocking")
    shared = keys_in_bucket(3, 4)
    a = start(t, shared[:2], "a", "bulk_insert")
    b = start(t, shared[2:], "b", "bulk_insert")
    commit_write(*a, lock=t.lock)
    with pytest.raises(WriteConflict):
        commit_write(*b, lock=t.lock)
    assert sorted(r["v"] for r in t.read().to_pylist()) == ["a", "a"]


def test_single_writer_mode_skips_the_check(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", concurrency_mode="single_writer")
    shared = keys_in_bucket(0, 2)
    a = start(t, shared[:1], "a")
    b = start(t, shared[1:], "b")
    commit_write(*b, lock=t.lock)
    commit_write(*a, lock=t.lock)
    assert t.read().num_rows == 2


def test_non_blocking_needs_merge_on_read(tmp_path):
    from lakecore.errors import InvalidTableConfig
    with pytest.raises(InvalidTableConfig, match="merge_on_read"):
        Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", table_type="copy_on_write",
                     concurrency_mode="non_blocking")


def test_opt_in_retry_reruns_a_write_that_lost_a_conflict(tmp_path, monkeypatch):
    import lakecore.table.writer as writer
    from lakecore import ConflictOptions, WriterOptions

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id",
                     options=WriterOptions(conflicts=ConflictOptions(retries=2, retry_backoff_s=0.01)))
    other = Table.open(t.uri)
    ids = keys_in_bucket(1, 2)
    real = writer.commit_write
    calls = []

    def commit_after_a_rival(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # a rival commits into the same file group while our first attempt runs
            other.upsert(pa.table({"id": pa.array(ids[:1], pa.int64()), "ts": [1], "v": ["rival"]}))
        return real(*args, **kwargs)

    monkeypatch.setattr(writer, "commit_write", commit_after_a_rival)
    result = t.upsert(pa.table({"id": pa.array(ids, pa.int64()), "ts": [1, 1], "v": ["ours", "ours"]}))
    assert result.attempts == 2
    assert {r["v"] for r in t.read().to_pylist()} == {"ours"}
    actions = [i.action for i in t.timeline().completed]
    assert actions == ["deltacommit", "rollback", "deltacommit"]


def test_without_retry_the_conflict_surfaces(tmp_path, monkeypatch):
    import lakecore.table.writer as writer

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    other = Table.open(t.uri)
    ids = keys_in_bucket(1, 1)
    real = writer.commit_write
    calls = []

    def commit_after_a_rival(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # the rival's own commit goes straight through
            other.upsert(pa.table({"id": pa.array(ids, pa.int64()), "ts": [1], "v": ["rival"]}))
        return real(*args, **kwargs)

    monkeypatch.setattr(writer, "commit_write", commit_after_a_rival)
    with pytest.raises(WriteConflict):
        t.upsert(pa.table({"id": pa.array(ids, pa.int64()), "ts": [1], "v": ["ours"]}))
