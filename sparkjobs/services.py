"""Table services on Spark: the driver plans and commits, tasks execute the plan's operations.

    compaction, clustering   driver: schedule (or pick up the pending one a dead job left) ->
                             start (claim the run: ServiceRunning while another live job runs it;
                             inflight; dead attempts' files deleted) -> tasks: one per operation,
                             execute_operation with a write token per run and task attempt ->
                             driver: commit (still our claim? then delete files of task attempts no
                             stat reports, complete)
    clean, archival          driver only (metadata and file deletions, no data to rewrite), under
                             their own run claims

A failed Spark job leaves the service pending; the next run resumes it (pending first, then new
work) once the failed job's claim is released or its heartbeat expired, exactly as
`weir table compact --resume` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql import SparkSession

from lakecore import Table
from lakecore.services import (
    ArchivalPolicy,
    CleanPolicy,
    ClusteringStrategy,
    CompactionStrategy,
    Running,
    commit_clustering,
    commit_compaction,
    load_clustering_plan,
    pending_clusterings,
    pending_compactions,
    schedule_clustering,
    schedule_compaction,
    start_clustering,
    start_compaction,
)
from lakecore.services import clustering as clustering_service
from lakecore.services import compaction as compaction_service
from lakecore.services.compaction import load_plan
from lakecore.timeline import Instant, TimelineStore, WriteStat
from sparkjobs.write import lakecore_error_in

SERVICES = ("compaction", "clustering", "clean", "archival")


@dataclass(frozen=True)
class ServiceOutcome:
    service: str
    instant: str | None          # the completed instant (None: nothing was due)
    operations: int = 0          # plan operations executed in Spark tasks
    resumed: bool = False        # finished a run a dead job had left pending
    detail: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"service": self.service, "instant": self.instant, "operations": self.operations,
                "resumed": self.resumed, **({"detail": self.detail} if self.detail else {})}


@dataclass(frozen=True)
class _Rewrite:
    """What differs between the services that rewrite file slices (compaction, clustering)."""

    name: str
    pending: Callable[[TimelineStore, Any], list[Instant]]
    load: Callable[[Any, str], Any]
    schedule: Callable[[], Any]
    start: Callable[[Any], Instant | Running]
    execute: Callable[[Running, Any, Any, str], WriteStat]   # (run, plan, op, token) -> stat
    commit: Callable[[Any, Running, list[WriteStat]], Instant]


def compact(spark: SparkSession, table: Table, strategy: CompactionStrategy | None = None) -> ServiceOutcome:
    """Finish a pending compaction, or schedule one and run it; operations run as Spark tasks."""
    storage, config, lock = table.storage, table.config, table.lock
    return _rewrite(spark, table, _Rewrite(
        "compaction", pending_compactions, load_plan,
        lambda: schedule_compaction(storage, config, lock, strategy or CompactionStrategy()),
        lambda plan: start_compaction(storage, config, plan, lock, heartbeat=table.options.heartbeat),
        lambda run, plan, op, token: compaction_service.execute_operation(
            storage, run.config, plan.instant_time, op, token),
        lambda plan, run, stats: commit_compaction(storage, lock, plan, run, stats, reconcile=True)))


def cluster(spark: SparkSession, table: Table, strategy: ClusteringStrategy | None = None) -> ServiceOutcome:
    """Finish a pending clustering, or schedule one and run it; operations run as Spark tasks."""
    storage, config, lock = table.storage, table.config, table.lock
    return _rewrite(spark, table, _Rewrite(
        "clustering", pending_clusterings, load_clustering_plan,
        lambda: schedule_clustering(storage, config, lock, strategy or ClusteringStrategy()),
        lambda plan: start_clustering(storage, config, plan, lock, heartbeat=table.options.heartbeat),
        lambda run, plan, op, token: clustering_service.execute_operation(
            storage, run.config, plan.instant_time, op, plan.strategy, token),
        lambda plan, run, stats: commit_clustering(storage, lock, plan, run, stats, reconcile=True)))


def _rewrite(spark: SparkSession, table: Table, how: _Rewrite) -> ServiceOutcome:
    storage = table.storage
    pending = how.pending(TimelineStore(storage), table.timeline())
    plan = how.load(storage, pending[0].requested_time) if pending else how.schedule()
    if plan is None:
        return ServiceOutcome(how.name, None)
    run = how.start(plan)
    if isinstance(run, Instant):  # it had completed already (a dead job got that far)
        return ServiceOutcome(how.name, run.requested_time, 0, bool(pending))
    running: Running = run
    execute = how.execute  # the tasks' closure: storage and the run only (never the lock or the claim)

    def task(index: int, op: Any, token: str) -> WriteStat:
        return execute(running, plan, op, token)

    try:
        stats = _run_operations(spark, plan.operations, task, how.name, running.attempt)
    except BaseException as exc:
        running.release()  # the next job resumes it at once
        cause = lakecore_error_in(exc)   # e.g. a damaged data file: the job's outcome names it
        if cause is None:
            raise
        raise cause from exc
    done = how.commit(plan, running, stats)  # deletes what other task attempts wrote, as the owner
    return ServiceOutcome(how.name, done.requested_time, len(plan.operations), bool(pending))


def clean(table: Table, policy: CleanPolicy | None = None) -> ServiceOutcome:
    done = table.maintenance.clean(policy, dry_run=False).instant
    return ServiceOutcome("clean", done.requested_time if done is not None else None)


def archive(table: Table, policy: ArchivalPolicy | None = None) -> ServiceOutcome:
    archived = table.maintenance.archive(policy or ArchivalPolicy()).archived
    return ServiceOutcome("archival", None, detail=archived.to_json() if archived is not None else None)


def _run_operations(spark: SparkSession, operations: tuple[Any, ...],
                    task: Callable[[int, Any, str], WriteStat], name: str, run: int) -> list[WriteStat]:
    """One Spark task per plan operation; each attempt writes under its own token
    (op-<run attempt>s<stage>-<task attempt>), so neither a retried or speculative task attempt nor a
    later run of the service ever collides with another's file."""
    def run_partition(items: Iterable[tuple[int, Any]]) -> Iterator[str]:
        ctx = TaskContext.get()
        for index, op in items:
            token = f"{index}-{run}s{ctx.stageId() if ctx else 0}-{ctx.attemptNumber() if ctx else 0}"
            yield json.dumps(task(index, op, token).to_json())

    if not operations:
        return []
    rdd = spark.sparkContext.parallelize(list(enumerate(operations)), len(operations))
    spark.sparkContext.setJobDescription(f"weir {name}: {len(operations)} operations")
    return [WriteStat.from_json(json.loads(s)) for s in rdd.mapPartitions(run_partition).collect()]
