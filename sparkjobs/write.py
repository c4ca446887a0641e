"""Batch writes of a Spark DataFrame into a lakecore table: one DataFrame = one instant.

    driver    Table.open -> check the DataFrame's schema against the table (bad input fails here,
              before any instant) -> WriteJob.start (instant, heartbeat, markers)
    shuffle   repartition by file group: every file group lands whole in one task. A format-2 table
              hashes record keys with Spark's own Murmur3 (`bucket_hash` "spark_murmur3",
              lakecore.layout.murmur3), so the JVM computes each row's bucket, pmod(hash(keys),
              buckets), on the keys cast to their stored types; a format-1 table ("weir_v1") first
              gets a column naming each row's file group from an Arrow UDF over the record key and
              partition fields (its hash exists in Python only)
    stage 2   each task: conform its rows (types, null keys, meta columns), precombine per partition,
              write one file per file group through lakecore (markers, early conflict checks),
              return the write stats as JSON rows
    driver    collect the stats -> WriteJob.commit(stats, reconcile=True): files of failed or
              speculative task attempts (named by markers, reported by no stat) are deleted first

Overwrites (insert_overwrite, insert_overwrite_table) go through the same WriteJob: for
insert_overwrite the driver first collects the partitions the input touches (a distinct over the
file-group column: they are the scope recorded when the instant starts); the tasks write base files;
the driver writes the empty base files of the scope's file groups no task got rows for.

A failed Spark job aborts the write (rolled back through its markers). A task that finds an early
conflict fails its stage at once (Spark cancels the other tasks) and the driver raises the
`EarlyConflict` with the other instant, file groups and bytes written (`.report()`).

An abort decided outside (the operator's, heard by the WriteJob's abort watch) cancels the write's
Spark jobs at once: they carry a job tag of their own (a tag, not a job group: a streaming query
runs its micro-batches in its own job group, which must stay), which the watch's callback cancels;
the driver then raises the `EarlyConflict` built from the abort's record.

Whatever failed the write's Spark job, the driver rolls back only once none of its tasks runs any
more (a cancelled job fails at once, while its tasks are still being killed: a task still writing
would leave a file the rollback did not see).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame
from pyspark.sql.functions import array, arrow_udf, col, element_at, lit, pmod, substring_index
from pyspark.sql.functions import hash as spark_hash
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from lakecore import Table, WriteJob, WriteResult, WriterOptions
from lakecore import errors as lakecore_errors
from lakecore.config import TableConfig
from lakecore.errors import EarlyConflict, InvalidInput, LakecoreError, SchemaMismatch
from lakecore.layout import murmur3, partition_path
from lakecore.timeline import WriteStat
from lakecore.write import (
    Operation,
    WriteContext,
    check_operation,
    combine_and_route,
    conform,
    file_group_codes,
    write_file_group,
)
from sparkjobs.contract import PAUSE_ENV

log = logging.getLogger(__name__)

FILE_GROUP_COLUMN = "_weir_file_group"
_EARLY = "WEIR-EARLY-CONFLICT"
_TASKS_END_S = 60.0  # a killed task ends within spark.python.task.killTimeout (2 s by default)

ArrowFn = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


@dataclass(frozen=True)
class Sidecar:
    """Columns a write carries besides the table's, looked at in its own tasks and decided on between the
    tasks' writes and the commit, so a caller that needs to know something of every input row (a Kafka
    batch: each message's position and whether it decoded) gets it without a second pass over the input.

    columns  the DataFrame's extra columns (never written)
    split    in each task, on all its rows (Arrow): (the rows to write, without `columns`; a JSON-able
             summary of the task's rows). Vectorized: it sees every row of the input
    decide   on the driver, with every task's summary: the commit's extra metadata; raising rolls the
             write back (nothing of it becomes visible)"""

    columns: tuple[str, ...]
    split: Callable[[pa.Table], tuple[pa.Table, Any]]
    decide: Callable[[list[Any]], Mapping[str, str]]


def takes_sidecar(config: TableConfig, operation: Operation) -> bool:
    """Whether a write of `operation` into a table of `config` can carry a Sidecar: the JVM routes its rows
    (a format-1 table's routing conforms every row's key in Python, a sidecar's rows may have none) and its
    scope is not computed from the input first (the overwrites)."""
    return config.bucket_hash == "spark_murmur3" and operation not in ("insert_overwrite",
                                                                        "insert_overwrite_table")


def write_dataframe(df: DataFrame, table: Table, operation: Operation = "upsert", *,
                    options: WriterOptions | None = None, extra: Mapping[str, Any] | None = None,
                    parallelism: int | None = None, sidecar: Sidecar | None = None,
                    before_commit: Callable[[], None] | None = None) -> WriteResult:
    """Write `df` as one instant of `table` (the table's lock and, unless given, its writer options).
    An unknown `operation` raises UnknownOperation before anything runs. `sidecar`: extra columns of `df`
    its tasks summarize and the driver decides on before the commit (takes_sidecar says when).
    `before_commit`: called once every task wrote (the input was read), right before the commit; raising
    rolls the write back."""
    operation = check_operation(operation)
    config = table.config
    if sidecar is not None and not takes_sidecar(config, operation):
        raise ValueError(f"a {operation} write into this table cannot carry a sidecar (takes_sidecar)")
    _check_schema(df.drop(*sidecar.columns) if sidecar else df, config, operation)
    spark = df.sparkSession
    n = parallelism or max(1, spark.sparkContext.defaultParallelism)
    options = options or table.options
    tag = f"weir-write-{uuid.uuid4().hex[:12]}"
    watch = options.abort_watch
    options = replace(options, abort_watch=replace(watch, on_abort=_cancelling(spark, tag, watch.on_abort)))
    routed, touched = _route(df, config, n, operation)
    with WriteJob.start(table.storage, config, table.lock, operation, options, extra=extra,
                        partitions=touched) as job:
        written = routed.mapInArrow(_write(job.context(), operation, sidecar.split if sidecar else None),
                                    "stats string, side string")
        spark.sparkContext.addJobTag(tag)
        try:
            # heard before the tag could cancel anything? (one heard between here and the job's start
            # cancels nothing: that stage runs on, and the commit refuses the instant)
            job.raise_if_aborted()
            try:
                rows = written.collect()
            except Exception as exc:
                _await_tasks_ended(spark.sparkContext, tag)  # before the rollback (leaving the with block)
                cause = job.outside_conflict() or _early_conflict_in(exc) or lakecore_error_in(exc)
                if cause is None:
                    raise
                raise cause from exc
        finally:
            spark.sparkContext.removeJobTag(tag)
        by_task = [[WriteStat.from_json(d) for d in json.loads(r["stats"])] for r in rows]
        _check_whole_groups(by_task)
        if sidecar is not None:   # may raise: the with block rolls the write back
            job.extra.update(sidecar.decide([json.loads(r["side"]) for r in rows]))
        if before_commit is not None:   # may raise: rolled back the same way
            before_commit()
        stats = [s for task in by_task for s in task]
        emptied = job.replaced_without_rows((s.partition, s.file_id) for s in stats)
        if emptied:  # an overwrite's groups without rows: small empty files, written here
            ctx = job.context(write_token="driver-0-0")
            stats += [s for g in emptied for s in write_file_group(ctx, g)]
        return job.commit(stats, reconcile=True)


def _check_whole_groups(by_task: list[list[WriteStat]]) -> None:
    """Every file group must come from one task (the shuffle's promise); two tasks writing one group
    would mean Spark's routing and lakecore's disagree: refuse the commit (the write is rolled back)."""
    owner: dict[tuple[str, str], int] = {}
    for task, stats in enumerate(by_task):
        for s in stats:
            if owner.setdefault((s.partition, s.file_id), task) != task:
                raise RuntimeError(
                    f"two Spark tasks wrote file group {s.partition!r}/{s.file_id} in one write: Spark's "
                    "bucket routing disagrees with lakecore's for this table (a bug: please report it with "
                    "the table's record-key types); the write was rolled back, nothing is visible")


def _cancelling(spark: Any, tag: str, then: Callable[[dict[str, Any]], None] | None
                ) -> Callable[[dict[str, Any]], None]:
    """An on_abort that cancels the write's running Spark jobs (those tagged `tag`), then calls `then`."""
    def on_abort(record: dict[str, Any]) -> None:
        spark.sparkContext.cancelJobsWithTag(tag)
        if then is not None:
            then(record)
    return on_abort


def _running_tasks(sc: Any, tag: str) -> int:
    """How many tasks of the jobs tagged `tag` still run (as far as Spark's status store knows)."""
    tracker = sc.statusTracker()
    running = 0
    for job_id in sc._jsc.sc().statusTracker().getJobIdsForTag(tag):  # not in PySpark's tracker
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            running += stage.numActiveTasks if stage is not None else 0
    return running


def _await_tasks_ended(sc: Any, tag: str, timeout_s: float = _TASKS_END_S) -> None:
    """Wait until no task of the failed write runs; after `timeout_s` go on (and say so): the rollback
    then runs, and what a lost task writes later is an orphan of a dead instant, never read."""
    deadline = time.monotonic() + timeout_s
    while (running := _running_tasks(sc, tag)) > 0:
        if time.monotonic() >= deadline:
            log.warning("%d task(s) of the failed write still run after %.0fs; rolling back anyway (files "
                        "they write later belong to a dead instant and are never read)", running, timeout_s)
            return
        time.sleep(0.05)


def _route(df: DataFrame, config: TableConfig, n: int, operation: Operation
           ) -> tuple[DataFrame, list[str] | None]:
    """The rows repartitioned so that every file group lands whole in one of `n` tasks, and for
    insert_overwrite the partition paths they touch (None for other operations)."""
    if config.bucket_hash != "spark_murmur3":  # a format-1 table: its hash exists in Python only
        grouped = df.withColumn(FILE_GROUP_COLUMN, _file_group(config))
        touched = _partitions(grouped) if operation == "insert_overwrite" else None
        return grouped.repartition(n, FILE_GROUP_COLUMN), touched
    # Spark's own hash() is the table's bucket hash: the JVM routes, no row goes to Python for it
    keys = [_as_stored(df, c, config) for c in config.record_key]
    bucket = pmod(spark_hash(*keys), lit(config.buckets))
    touched = _touched_partitions(df, config) if operation == "insert_overwrite" else None
    if config.partition_fields:
        parts = [_as_stored(df, c, config) for c in config.partition_fields]
        return df.repartition(n, *parts, bucket), touched
    # one partition: bucket b goes to task b mod n (a hash of the bucket alone could put 3 of 4
    # buckets in one of 2 tasks), through an int per task that Spark's hash partitioning sends there
    tokens = _tokens(n)
    task = element_at(array(*[lit(t) for t in tokens]), (bucket % lit(n)) + lit(1))
    return df.repartition(n, task), touched


def _tokens(n: int) -> list[int]:
    """For each task i in [0, n), an int32 that Spark's repartition(n, <that int>) sends to task i
    (HashPartitioning: pmod(hash(value), n), the Murmur3 lakecore computes too)."""
    found: dict[int, int] = {}
    start = 0
    while len(found) < n:
        candidates = np.arange(start, start + 4 * n + 64, dtype=np.int32)
        of = murmur3.bucket_of([pa.array(candidates)], n) if n > 1 else np.zeros(len(candidates), np.int32)
        for value, task in zip(candidates.tolist(), of.tolist(), strict=True):
            found.setdefault(task, value)
        start += len(candidates)
    return [found[i] for i in range(n)]


def _as_stored(df: DataFrame, name: str, config: TableConfig) -> Column:
    """Column `name` in the Spark type of the table's stored type, so Spark hashes a row's key as
    lakecore will hash the stored row (a value that does not fit becomes null here; the task's
    conform then refuses it with the lakecore error). A partition field of a type Spark has no
    counterpart for (unsigned, time of day) stays as it is: it only groups rows, it is not hashed."""
    stored = config.schema.field(name).type
    current = df.schema[name].dataType
    wanted: DataType | None
    if pa.types.is_timestamp(stored):  # hashed as microseconds, whatever the unit (layout.murmur3)
        wanted = current if isinstance(current, TimestampType | TimestampNTZType) else TimestampType()
    elif pa.types.is_decimal128(stored):
        wanted = DecimalType(stored.precision, stored.scale)
    else:
        wanted = _SPARK_TYPES.get(stored)
    return col(name) if wanted is None or current == wanted else col(name).try_cast(wanted)


_SPARK_TYPES: dict[pa.DataType, DataType] = {
    pa.bool_(): BooleanType(), pa.int8(): ByteType(), pa.int16(): ShortType(), pa.int32(): IntegerType(),
    pa.int64(): LongType(), pa.string(): StringType(), pa.large_string(): StringType(),
    pa.binary(): BinaryType(), pa.large_binary(): BinaryType(), pa.date32(): DateType(),
}


def _touched_partitions(df: DataFrame, config: TableConfig) -> list[str]:
    """The partition paths of the rows, from their distinct partition values (computed in the
    driver with lakecore's partition_path, on the values converted to the stored types)."""
    if not config.partition_fields:
        return [] if df.isEmpty() else [""]
    fields = config.partition_fields
    values = df.select(*[col(f) for f in fields]).distinct().toArrow()
    columns = []
    for f in fields:
        stored = config.schema.field(f).type
        try:
            columns.append(values.column(f).cast(stored, safe=True).to_pylist())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatch(f"partition field {f!r} cannot be converted to {stored} without loss "
                                 f"({exc}); fix the values") from None
    return sorted({partition_path(fields, row) for row in zip(*columns, strict=True)
                   if all(v is not None for v in row)})  # null partition values: the tasks refuse them


def _partitions(grouped: DataFrame) -> list[str]:
    """The partition paths of the rows (the part of the file-group column before its last '|';
    partition paths percent-encode their values, so they hold no '|')."""
    paths = grouped.select(substring_index(col(FILE_GROUP_COLUMN), "|", 1).alias("p")).distinct().collect()
    return sorted(r["p"] for r in paths)


def _check_schema(df: DataFrame, config: TableConfig, operation: Operation) -> None:
    """Raise what conform would raise for the DataFrame's rows (missing or unknown columns, wrong
    types) before any instant exists."""
    try:
        arrow = to_arrow_schema(df.schema, timezone="UTC")  # timestamps: the instant, whatever the zone
    except TypeError as exc:
        raise InvalidInput(f"the DataFrame has a column type Arrow cannot carry: {exc}") from exc
    conform(arrow.empty_table(), config, operation)


def _file_group(config: TableConfig) -> Column:
    """A column naming each row's file group ("<partition path>|<bucket>"), computed by an Arrow UDF
    over the record key and partition fields only, conformed to the table's types first (so a row
    hashes as it will be stored; a null key fails here with the lakecore error)."""
    names = [*config.record_key, *[f for f in config.partition_fields if f not in config.record_key]]

    def file_group(*columns: pa.Array) -> pa.Array:
        keys = conform(pa.table(dict(zip(names, columns, strict=True))), config, "delete").rows
        codes, paths = file_group_codes(keys, config)
        part = pa.array(np.asarray(paths, dtype=object)[codes // config.buckets], pa.string())
        bucket = pa.array((codes % config.buckets).astype(np.int64)).cast(pa.string())
        return pc.binary_join_element_wise(part, bucket, "|")

    udf = arrow_udf(file_group, StringType())  # type: ignore[call-overload]  # scalar, from the hints
    return udf(*[col(n) for n in names])


def _write(ctx: WriteContext, operation: Operation,
           split: Callable[[pa.Table], tuple[pa.Table, Any]] | None = None) -> ArrowFn:
    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        task = TaskContext.get()
        if task is not None:  # one token per task attempt: a retry never overwrites a file
            ctx_ = _with_token(ctx, f"{task.partitionId()}-{task.stageId()}-{task.attemptNumber()}")
        else:
            ctx_ = ctx
        received = list(batches)
        if not received or not any(b.num_rows for b in received):
            return  # a task whose shuffle partition got no file group
        table = pa.Table.from_batches(received)
        if FILE_GROUP_COLUMN in table.column_names:  # a format-1 table's routing column
            table = table.drop_columns([FILE_GROUP_COLUMN])
        side = None
        if split is not None:
            table, side = split(table)
        stats: list[dict[str, Any]] = []
        if table.num_rows:
            rows = conform(table, ctx_.config, operation).rows
            try:
                for group in combine_and_route(rows, ctx_.config, operation):
                    stats += [s.to_json() for s in write_file_group(ctx_, group)]
            except EarlyConflict as exc:  # fail the stage now; the driver rebuilds the conflict
                raise RuntimeError(f"{_EARLY} {json.dumps(exc.report())}") from None
        hold_if_asked(PAUSE_ENV, ctx_.instant_time)
        yield pa.RecordBatch.from_pydict({"stats": [json.dumps(stats)], "side": [json.dumps(side)]})
    return write


_PAUSE_LIMIT_S = 300.0


def hold_if_asked(variable: str, point: str) -> None:
    """A pause point for tests that need a write held at `point` (to force an interleaving with another
    writer, the supervisor, or a kill): with the variable set to a directory (WEIR_TEST_PAUSE_DIR, in
    tasks through `spark.executorEnv.WEIR_TEST_PAUSE_DIR`: a task holds with its files and markers
    written), this touches `<dir>/reached-<point>` and waits while `<dir>/hold` exists (at most five
    minutes). A `<dir>` that does not exist yet is created with its `hold`: a test that cannot reach the
    task's file system beforehand (a pod on a kind cluster) releases it with `kubectl exec` instead.
    Unset: nothing."""
    folder = os.environ.get(variable)
    if not folder:
        return
    if not Path(folder).exists():   # made whole, then renamed: another task never sees it without `hold`
        staging = Path(f"{folder}.{os.getpid()}.{threading.get_ident()}")
        staging.mkdir(parents=True)
        (staging / "hold").touch()
        try:
            staging.rename(folder)
        except OSError:   # another task got there first
            shutil.rmtree(staging, ignore_errors=True)
    (Path(folder) / f"reached-{point}").touch()
    deadline = time.monotonic() + _PAUSE_LIMIT_S
    while (Path(folder) / "hold").exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _with_token(ctx: WriteContext, token: str) -> WriteContext:
    return replace(ctx, write_token=token)


def lakecore_error_in(exc: BaseException) -> LakecoreError | None:
    """The lakecore error a task failed with (bad input found in a task: null keys, wrong values; a
    damaged data file), rebuilt from the task's traceback text, so callers catch the same classes as
    for local writes and services."""
    found = re.search(r"lakecore\.errors\.(\w+): ([^\n]*)", str(exc))
    kind = getattr(lakecore_errors, found.group(1), None) if found else None
    if found is None or not (isinstance(kind, type) and issubclass(kind, LakecoreError)):
        return None
    try:
        return kind(found.group(2))
    except TypeError:  # an error class that needs more than a message
        return None


def _early_conflict_in(exc: BaseException) -> EarlyConflict | None:
    found = re.search(_EARLY + r" (\{[^\n]*\})", str(exc))
    if found is None:
        return None
    report = json.loads(found.group(1))
    return EarlyConflict(report["message"], instant=report["instant"], other=report["other"],
                         file_groups=frozenset((p, f) for p, f in report["file_groups"]),
                         bytes_written=report["bytes_written"])
