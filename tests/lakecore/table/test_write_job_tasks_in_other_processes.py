"""A WriteJob's file-group tasks run in other processes (spawned: nothing shared but the pickled
context), as the Spark writers run them in executors: the driver begins, beats and commits; a task
that fails leaves nothing once the driver aborts; markers go to files or to the driver's marker
service over HTTP; an early conflict found in a task reaches the driver with its report."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.concurrency.conflicts.early import EarlyDetection
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig, read_last_beat
from lakecore.errors import EarlyConflict
from lakecore.table import ConflictOptions, MarkerOptions, WriteJob, WriterOptions
from lakecore.write import combine_and_route, conform, list_markers, write_file_group

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
SPAWN = multiprocessing.get_context("spawn")


def batch(ids, ts):
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "v": pa.array([f"{i}@{ts}" for i in ids])})


def groups_of(t: Table, data: pa.Table, operation="upsert"):
    return combine_and_route(conform(data, t.config, operation).rows, t.config, operation)


def write_then_fail(ctx, group):
    """A task that dies after writing its file (its marker exists, the file too)."""
    write_file_group(ctx, group)
    raise RuntimeError(f"executor lost while writing {group.file_id}")


def run_tasks(fn, ctx, groups):
    with ProcessPoolExecutor(2, mp_context=SPAWN) as pool:
        return [s for stats in pool.map(fn, [ctx] * len(groups), groups) for s in stats]


def rows(t: Table):
    return sorted(Table.open(t.uri).read().select(["id", "ts", "v"]).to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
@pytest.mark.parametrize("batched_markers", [False, True])
def test_tasks_in_other_processes_write_and_the_driver_commits(tmp_path, table_type, batched_markers):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts",
                     table_type=table_type, buckets=4)
    t.upsert(batch(range(0, 40, 2), 1))
    # beats often, so the driver's beat is seen below, and tolerates a busy machine: spawning the task
    # processes on 2 loaded cores starved the beating thread for 0.8 s once (the write must not expire)
    options = WriterOptions(heartbeat=HeartbeatConfig(interval_s=0.2, tolerable_misses=50),
                            markers=MarkerOptions(batched=batched_markers))
    groups = groups_of(t, batch(range(20, 60), 2))
    with WriteJob.start(t.storage, t.config, t.lock, "upsert", options, extra={"offset": 7}) as job:
        stats = run_tasks(write_file_group, job.context(), groups)
        assert read_last_beat(t.storage, job.instant.requested_time) is not None  # the driver beats
        result = job.commit(stats)
    # log files hold the 40 written rows; rewritten base files every live row of their groups (all 4)
    assert result.records == (40 if table_type == "merge_on_read" else 50)
    assert result.file_groups == len(groups) == 4
    expected = {i: 1 for i in range(0, 20, 2)} | {i: 2 for i in range(20, 60)}
    assert [(r["id"], r["ts"]) for r in rows(t)] == sorted(expected.items())
    assert t.commit_metadata(result.instant).extra["offset"] == 7
    assert list_markers(t.storage, result.instant.requested_time) == []


@pytest.mark.parametrize("batched_markers", [False, True])
def test_a_failed_task_leaves_nothing_once_the_driver_aborts(tmp_path, batched_markers):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=4)
    t.upsert(batch(range(10), 1))
    before = rows(t)
    files_before = {f.path for f in t.storage.list_tree("") if ".weir" not in f.path}
    options = WriterOptions(markers=MarkerOptions(batched=batched_markers))
    job = WriteJob.start(t.storage, t.config, t.lock, "upsert", options)
    with pytest.raises(RuntimeError, match="executor lost"), job:
        run_tasks(write_then_fail, job.context(), groups_of(t, batch(range(5, 30), 2)))
    assert rows(t) == before
    assert {f.path for f in t.storage.list_tree("") if ".weir" not in f.path} == files_before
    assert not Table.open(t.uri).timeline().pending
    with pytest.raises(Exception, match="already finished"):
        job.commit([])


def test_an_early_conflict_in_a_task_reaches_the_driver_with_its_report(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1)
    t.upsert(batch([1], 1))
    older = WriteJob.start(t.storage, t.config, t.lock, "upsert")
    older_stats = [s for g in groups_of(t, batch([1, 2], 2)) for s in write_file_group(older.context(), g)]
    younger = WriteJob.start(t.storage, t.config, t.lock, "upsert",
                             WriterOptions(conflicts=ConflictOptions(early_detection=EarlyDetection("direct"))))
    with pytest.raises(EarlyConflict) as caught, younger:
        run_tasks(write_file_group, younger.context(), groups_of(t, batch([3], 3)))
    report = caught.value.report()
    assert report["instant"] == younger.instant.requested_time
    assert report["other"] == older.instant.requested_time
    assert report["file_groups"] == [["", older_stats[0].file_id]]
    assert list_markers(t.storage, younger.instant.requested_time) == []
    older.commit(older_stats)  # the older writer is unaffected
    assert [r["id"] for r in rows(t)] == [1, 2]


def test_reconcile_deletes_what_a_retried_task_attempt_left(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1)
    (group,) = groups_of(t, batch([1, 2, 3], 1))
    with WriteJob.start(t.storage, t.config, t.lock, "upsert") as job:
        lost = write_file_group(job.context(write_token="0-1-0"), group)   # attempt 0, its result lost
        kept = write_file_group(job.context(write_token="0-1-1"), group)   # the retry
        job.commit(kept, reconcile=True)
    assert not t.storage.exists(lost[0].path) and t.storage.exists(kept[0].path)
    assert [(r["id"], r["ts"]) for r in rows(t)] == [(1, 1), (2, 1), (3, 1)]
