"""The write jobs aborted from outside while a stage runs (the operator's decision on a conflict
between writers): their Spark jobs are cancelled at once, the instant is rolled back and the job
exits with the conflict code, its result line saying who decided, against whom and on which file
groups. Heard from the proof of death on storage, or at once from the abort flag in ZooKeeper; a
streaming writer's micro-batch ends the query the same way (never retried).

Each job runs here in-process on the shared local Spark, with its tasks held after writing their files
until a gate file appears (it never does while the job runs): only the abort can end the stage early.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sparkjobs.batch_write as batch_write
import sparkjobs.stream_write as stream_write
import sparkjobs.write as spark_write
from lakecore import Table
from lakecore.concurrency.liveness.aborts import raise_abort_flag
from lakecore.concurrency.liveness.heartbeat import mark_aborted, read_aborted
from lakecore.concurrency.liveness.writers import ZooKeeperWriterRegistry
from lakecore.config import LockSpec
from lakecore.timeline import now_ms
from sparkjobs.contract import EXIT_CONFLICT, BatchWriteArgs, StreamWriteArgs
from tests.support.operator import wait_until

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
WINNER = "20261123101500123"
WRITE = spark_write._write  # the tasks' function, before any test replaces it
STAGE_S = 60.0  # how long a held task waits for the gate: the stage cannot end sooner unless cancelled


def held_tasks(gate: Path) -> Callable[..., Any]:
    """A replacement for sparkjobs.write._write whose tasks (those given rows) write their file groups,
    then wait for `gate/release` for up to STAGE_S (leaving `gate/finished-*` if they got through)."""
    real = WRITE

    def write(ctx: Any, operation: Any, split: Any = None) -> Any:
        inner = real(ctx, operation, split)

        def held(batches: Iterator[Any]) -> Iterator[Any]:
            import os as os_
            import time as time_

            out = list(inner(batches))
            if not out:  # a task without file groups
                return
            tag = f"{os_.getpid()}-{time_.monotonic_ns()}"
            open(os_.path.join(gate, f"entered-{tag}"), "w").close()
            deadline = time_.monotonic() + STAGE_S
            while not os_.path.exists(os_.path.join(gate, "release")) and time_.monotonic() < deadline:
                time_.sleep(0.05)
            open(os_.path.join(gate, f"finished-{tag}"), "w").close()
            yield from out
        return held
    return write


def late_tasks(gate: Path) -> Callable[..., Any]:
    """A replacement for sparkjobs.write._write whose tasks write their file groups, wait until the
    write is cancelled (`gate/cancelled`), then write them again — once the rollback is done, or
    after 1.5 s (before Spark kills a cancelled Python task, 2 s by default)."""
    real = WRITE

    def write(ctx: Any, operation: Any, split: Any = None) -> Any:
        def late(batches: Iterator[Any]) -> Iterator[Any]:
            import os as os_
            import time as time_

            from lakecore.write import list_markers

            received = list(batches)
            out = list(real(ctx, operation, split)(iter(received)))
            if not out:
                return
            open(os_.path.join(gate, f"entered-{os_.getpid()}"), "w").close()
            deadline = time_.monotonic() + STAGE_S
            while not os_.path.exists(os_.path.join(gate, "cancelled")) and time_.monotonic() < deadline:
                time_.sleep(0.02)
            deadline = time_.monotonic() + 1.5
            while list_markers(ctx.storage, ctx.instant_time) and time_.monotonic() < deadline:
                time_.sleep(0.02)
            # the same files again, each after its marker
            out = list(real(ctx, operation, split)(iter(received)))
            open(os_.path.join(gate, f"late-{os_.getpid()}"), "w").close()
            yield from out
        return late
    return write


class Job:
    """A job's main on a thread; its exit code and result line once it ends."""

    def __init__(self, args: Any, capsys: pytest.CaptureFixture[str],
                 main: Callable[[list[str]], int] = batch_write.main) -> None:
        self.code: int | None = None
        self._capsys = capsys
        self.thread = threading.Thread(target=self._run, args=(main, args.to_argv()), name="write-job")
        self.thread.start()

    def _run(self, main: Callable[[list[str]], int], argv: list[str]) -> None:
        self.code = main(argv)

    def result(self, timeout: float) -> tuple[int | None, dict[str, Any]]:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the aborted job is still running"
        lines = [line for line in self._capsys.readouterr().out.splitlines() if line.startswith("{")]
        return self.code, json.loads(lines[-1])


@pytest.fixture
def gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setattr(spark_write, "_write", held_tasks(gate))
    yield gate
    (gate / "release").touch()  # a task that outlived its job must not hold a core of the shared session


def table_with_input(tmp_path: Path, lock: LockSpec | None = None) -> tuple[Table, str, set[str]]:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                     **({"lock": lock} if lock else {}))
    t.upsert(pa.table({"id": list(range(10)), "ts": [1] * 10, "v": ["old"] * 10}, schema=SCHEMA))
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": list(range(200)), "ts": [2] * 200, "v": ["new"] * 200}, schema=SCHEMA),
                   source)
    return t, str(source), data_files(t)


def data_files(t: Table) -> set[str]:
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


def held_instant(t: Table, gate: Path) -> str:
    """The job's instant, once one of its tasks wrote its files and is held."""
    wait_until(lambda: any(p.name.startswith("entered-") for p in gate.iterdir()), timeout=120)
    (pending,) = Table.open(t.uri).timeline().pending
    return pending.requested_time


def decision(file_groups: list[list[str]]) -> dict[str, Any]:
    return {"reason": "conflict", "other": WINNER, "file_groups": file_groups, "decided_by": "weir-operator"}


def assert_stopped_and_rolled_back(t: Table, gate: Path, instant: str, files_before: set[str],
                                   code: int | None, out: dict[str, Any]) -> None:
    assert not any(p.name.startswith("finished-") for p in gate.iterdir())  # the stage did not end by itself
    assert code == EXIT_CONFLICT and out["outcome"] == "conflict" and out["early"] is True, out
    assert out["instant"] == instant and out["other"] == WINNER and out["aborted_by"] == "weir-operator"
    assert out["file_groups"] == [["", "0000"]] and out["bytes_written"] > 0, out
    fresh = Table.open(t.uri)
    found = fresh.timeline().find(instant)
    assert not fresh.timeline().pending and (found is None or not found.is_completed)
    assert data_files(t) == files_before  # what its tasks wrote is gone
    assert sorted({r["v"] for r in fresh.read().to_pylist()}) == ["old"]


@pytest.mark.spark
def test_an_abort_on_storage_cancels_the_running_stage(spark, tmp_path, gate, capsys):
    t, source, files_before = table_with_input(tmp_path)
    job = Job(BatchWriteArgs(table=t.uri, source=source, app_name="abort-on-storage"), capsys)
    instant = held_instant(t, gate)
    mark_aborted(t.storage, instant, "weir-operator", now_ms(), decision([["", "0000"]]))
    code, out = job.result(timeout=STAGE_S * 0.75)
    assert_stopped_and_rolled_back(t, gate, instant, files_before, code, out)
    assert read_aborted(t.storage, instant)["by"] == "weir-operator"  # the decision's record stays


@pytest.mark.spark
@pytest.mark.zookeeper
def test_an_abort_flag_in_zookeeper_stops_the_job_at_once(spark, zookeeper_server, tmp_path, gate, capsys,
                                                         monkeypatch):
    connect = zookeeper_server.connect_string
    t, source, files_before = table_with_input(tmp_path, LockSpec("zookeeper", connect=connect))
    real = batch_write.writer_options

    def slow_storage_check(*a: Any, **kw: Any) -> Any:  # only the flag's watch can explain a prompt stop
        options = real(*a, **kw)
        return replace(options, abort_watch=replace(options.abort_watch, check_s=STAGE_S * 10))

    monkeypatch.setattr(batch_write, "writer_options", slow_storage_check)
    monkeypatch.setenv("WEIR_WRITER", "lake/clicks")
    job = Job(BatchWriteArgs(table=t.uri, source=source, zookeeper=connect, app_name="abort-by-flag"), capsys)
    instant = held_instant(t, gate)
    registered = ZooKeeperWriterRegistry(connect).live_writers(t.uri)[instant]
    assert registered["writer"] == "lake/clicks" and registered["pod"]  # who to tell, whom to delete
    record = decision([["", "0000"]])
    # as the operator does it: the proof of death first (it fences), then the flag (it is heard)
    mark_aborted(t.storage, instant, "weir-operator", now_ms(), record)
    raise_abort_flag(connect, t.uri, instant, {**record, "instant": instant, "by": "weir-operator"})
    code, out = job.result(timeout=STAGE_S * 0.75)
    assert_stopped_and_rolled_back(t, gate, instant, files_before, code, out)


@pytest.mark.spark
def test_a_streaming_writer_aborted_in_a_micro_batch_ends_as_a_conflict(spark, tmp_path, gate, capsys):
    t, source, files_before = table_with_input(tmp_path)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    Path(source).rename(incoming / "0.parquet")
    args = StreamWriteArgs(table=t.uri, source=str(incoming), writer_id="clicks",
                           checkpoint=str(tmp_path / "checkpoint"), trigger_seconds=1.0)
    job = Job(args, capsys, stream_write.main)
    instant = held_instant(t, gate)
    mark_aborted(t.storage, instant, "weir-operator", now_ms(), decision([["", "0000"]]))
    code, out = job.result(timeout=STAGE_S * 0.75)  # not retried, and the query does not go on
    assert_stopped_and_rolled_back(t, gate, instant, files_before, code, out)


@pytest.mark.spark
def test_the_rollback_waits_for_cancelled_tasks_still_writing(spark, tmp_path, gate, capsys, monkeypatch):
    monkeypatch.setattr(spark_write, "_write", late_tasks(gate))
    real = spark_write._cancelling

    def cancelling(spark: Any, tag: str, then: Any) -> Callable[[dict[str, Any]], None]:
        cancel = real(spark, tag, then)

        def on_abort(record: dict[str, Any]) -> None:
            cancel(record)
            (gate / "cancelled").touch()  # the tasks go on writing from here, until Spark kills them
        return on_abort

    monkeypatch.setattr(spark_write, "_cancelling", cancelling)
    t, source, files_before = table_with_input(tmp_path)
    job = Job(BatchWriteArgs(table=t.uri, source=source, app_name="abort-late-tasks"), capsys)
    instant = held_instant(t, gate)
    mark_aborted(t.storage, instant, "weir-operator", now_ms(), decision([["", "0000"]]))
    code, out = job.result(timeout=STAGE_S * 0.75)
    assert code == EXIT_CONFLICT and out["aborted_by"] == "weir-operator", out
    tracker = spark.sparkContext.statusTracker()
    wait_until(lambda: sum(e.numRunningTasks for e in tracker.getExecutorInfos()) == 0)  # killed or done
    assert data_files(t) == files_before  # nothing a late task wrote outlives the rollback
