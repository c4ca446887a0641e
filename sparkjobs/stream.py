"""Streaming writes: Structured Streaming with foreachBatch, one micro-batch = one instant.

Exactly once: each commit records the writer's id and the micro-batch id in its metadata
(`weir.writer`, `weir.batch`). Spark re-runs the last micro-batch after a restart when the query
died between our commit and its own checkpoint; a batch whose id this writer already committed is
skipped, so it is never written twice. Several streaming writers (distinct ids) may fill one table:
non-blocking tables take them all; optimistic ones may abort a micro-batch on a true file-group
conflict, which is retried `options.conflicts.retries` times and then fails the query (the operator's
restart policy takes over). A micro-batch aborted from outside (the operator's decision) is never
retried: it fails the query at once, and `BatchWriter.aborted` keeps its EarlyConflict.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery

from lakecore import Table, WriterOptions
from lakecore.errors import EarlyConflict, LakecoreError, WriteConflict
from lakecore.timeline import Instant
from lakecore.write import Operation, check_operation
from sparkjobs.write import Sidecar, hold_if_asked, write_dataframe

WRITER_KEY = "weir.writer"
BATCH_KEY = "weir.batch"
# a pause point for tests: after a micro-batch's commit, before Spark records it in its checkpoint
COMMITTED_PAUSE_ENV = "WEIR_TEST_PAUSE_COMMITTED_DIR"


def last_committed_batch(table: Table, writer_id: str) -> int | None:
    """The newest micro-batch id `writer_id` committed to the table (active timeline first, then the
    archived one), or None if it never committed."""
    extra = last_commit_extra(table, writer_id, BATCH_KEY)
    return int(extra[BATCH_KEY]) if extra is not None else None


def last_commit_extra(table: Table, writer_id: str, key: str) -> dict[str, Any] | None:
    """The commit metadata of the newest commit `writer_id` made that records `key` (active timeline
    first, then the archived one), or None."""
    timeline = table.timeline()  # a fresh load
    found = _newest(table, reversed(timeline.completed), writer_id, key)
    if found is None and timeline.archived.count:
        found = _newest(table, reversed(table.archived_instants()), writer_id, key)
    return found


def _newest(table: Table, instants: Any, writer_id: str, key: str) -> dict[str, Any] | None:
    for instant in instants:
        if instant.action not in ("commit", "deltacommit", "replacecommit"):  # an overwrite too
            continue
        extra = table.commit_metadata(instant).extra
        if extra.get(WRITER_KEY) != writer_id or key not in extra:
            continue
        if key != BATCH_KEY or str(extra[BATCH_KEY]).lstrip("-").isdigit():
            return dict(extra)
    return None


@dataclass(frozen=True)
class Prepared:
    """What a micro-batch writes (`df`, with `extra` in its commit, and a `sidecar` its write summarizes and
    decides on before the commit), what to check once it is written, before its commit (`before_commit`:
    raising rolls it back), and what to do once it committed or whatever happened (`release`, e.g.
    unpersist)."""

    df: DataFrame
    extra: Mapping[str, str] = field(default_factory=dict)
    committed: Callable[[], None] = lambda: None
    release: Callable[[], None] = lambda: None
    sidecar: Sidecar | None = None
    before_commit: Callable[[], None] | None = None


Prepare = Callable[[DataFrame, int], Prepared]


class BatchWriter:
    """The foreachBatch function of one streaming writer (runs on the driver)."""

    def __init__(self, table: Table, writer_id: str, operation: Operation = "upsert",
                 options: WriterOptions | None = None, extra: dict[str, str] | None = None, *,
                 prepare: Prepare | None = None, fresh_checkpoint: bool = False) -> None:
        if not writer_id:
            raise ValueError("a streaming writer needs an id (it makes micro-batches exactly once)")
        self.table, self.writer_id = table, writer_id
        self.operation = check_operation(operation)  # an unknown one fails before the query starts
        self.options = options or table.options
        self.extra = dict(extra or {})
        self.prepare = prepare
        # a query on a fresh checkpoint numbers its micro-batches from 0 again: the ids committed before
        # it mean nothing to it (its source resumes from what the table recorded: sparkjobs.kafka)
        self.committed: int | None = None if fresh_checkpoint else last_committed_batch(table, writer_id)
        self.skipped: list[int] = []
        self.instants: list[Instant] = []
        self.aborted: EarlyConflict | None = None  # a micro-batch's abort decided outside: the query ends
        self.failure: LakecoreError | None = None   # why the last micro-batch failed (bad input, ...)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self.committed is not None and batch_id <= self.committed:
            self.skipped.append(batch_id)  # committed before the query's checkpoint caught up
            return
        try:
            prepared = self.prepare(batch, batch_id) if self.prepare is not None else Prepared(batch)
            try:
                result = self._write(prepared, batch_id)
            finally:
                prepared.release()
        except LakecoreError as exc:   # the query ends with Spark's wrapping of it: keep ours for the job
            self.failure = exc
            raise
        prepared.committed()
        self.committed = batch_id
        self.instants.append(result.instant)
        hold_if_asked(COMMITTED_PAUSE_ENV, f"batch-{batch_id}")

    def _write(self, prepared: Prepared, batch_id: int) -> Any:
        extra = {**self.extra, **prepared.extra, WRITER_KEY: self.writer_id, BATCH_KEY: str(batch_id)}
        attempt = 0
        while True:
            try:
                return write_dataframe(prepared.df, self.table, self.operation, options=self.options,
                                       extra=extra, sidecar=prepared.sidecar,
                                       before_commit=prepared.before_commit)
            except WriteConflict as exc:
                if isinstance(exc, EarlyConflict) and exc.aborted_by:  # decided outside: stop, never retry
                    self.aborted = exc
                    raise
                attempt += 1
                if attempt > self.options.conflicts.retries:
                    raise
                delay = min(self.options.conflicts.retry_backoff_s * 2 ** (attempt - 1), 10.0)
                time.sleep(delay * (0.5 + random.random()))


def write_stream(df: DataFrame, table: Table, *, writer_id: str, checkpoint: str,
                 operation: Operation = "upsert", options: WriterOptions | None = None,
                 trigger: dict[str, Any] | None = None,
                 on_batch: Callable[[BatchWriter], None] | None = None,
                 prepare: Prepare | None = None, fresh_checkpoint: bool = False) -> StreamingQuery:
    """Start the streaming write of `df` (a streaming DataFrame). `trigger`: DataStreamWriter.trigger
    keyword arguments, e.g. {"processingTime": "10 seconds"} or {"availableNow": True}. `on_batch` is
    called with the writer after every micro-batch, written or failed. `prepare` turns a micro-batch
    into what it writes (sparkjobs.kafka); `fresh_checkpoint`: the query starts on an empty checkpoint
    (`checkpoint_is_fresh`)."""
    writer = BatchWriter(table, writer_id, operation, options, prepare=prepare,
                         fresh_checkpoint=fresh_checkpoint)

    def each(batch: DataFrame, batch_id: int) -> None:
        try:
            writer(batch, batch_id)
        finally:  # also after a failed micro-batch: its caller reads why (`writer.aborted`)
            if on_batch is not None:
                on_batch(writer)

    stream = df.writeStream.foreachBatch(each).option("checkpointLocation", checkpoint) \
        .queryName(f"weir-{writer_id}")
    if trigger:
        stream = stream.trigger(**trigger)
    return stream.start()


def checkpoint_is_fresh(spark: Any, checkpoint: str) -> bool:
    """Whether a query on `checkpoint` starts afresh (no micro-batch planned there yet: its offsets log is
    empty or missing), through Spark's own file systems (any URI the query can use)."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint.rstrip('/')}/offsets")
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(path):
        return True
    return not any(s.getPath().getName().isdigit() for s in fs.listStatus(path))
