"""Compaction of merge-on-read tables: schedule (driver, under the lock), execute (one task per file
slice, anywhere), commit (driver, under the lock) — and resume or roll back a failed one.

    schedule: lock -> reload timeline -> no compaction pending? -> draw P -> plan over the view of
              completed instants -> create P.compaction.requested (body: the plan) -> unlock
    execute:  per operation: read the planned base + logs (nothing else), merge to the base state
              (tombstones kept), marker, write `<fileId>_<token>_<P>.parquet`
    commit:   P.compaction.inflight ... lock -> reload -> still ours? -> complete with the new base
              files as WriteStat(kind="base") -> unlock -> delete markers

Every log in the plan completed before P (P is drawn under the lock after them), and the view gives
a base named with P every log completed before P — exactly the planned ones — so logs of writers
that complete after P join the new slice: nothing is lost, and compaction never conflicts with
writers (`occ.CHECKED_ACTIONS` leaves compaction out). One compaction per table at a time, run by
one process at a time (a run claim, concurrency/liveness/runs.py: a second caller gets ServiceRunning while
the first is alive, and resumes it once the first is dead).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.concurrency import Lock, view_for_services
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.config import OP, TableConfig
from lakecore.errors import CompactionPending, NotMergeOnRead
from lakecore.formats import read_files, write_data_file
from lakecore.layout import base_file_name, parse_data_file_name
from lakecore.merge import merge_to_base
from lakecore.read.spec import (
    as_base_file,
    base_schema,
    file_schema,
    merge_spec,
    op_columns,
    purge_tombstones,
)
from lakecore.services.compaction_plan import (
    COMPACT_ALL,
    CompactionOperation,
    CompactionPlan,
    CompactionStrategy,
    plan_compaction,
)
from lakecore.services.rewrite import (
    DEFAULT_HEARTBEAT,
    Running,
    commit,
    pending_of,
    resume,
    rollback_pending,
    run_tasks,
    schedule,
)
from lakecore.storage import Storage
from lakecore.timeline import (
    Action,
    CommitMetadata,
    Instant,
    Timeline,
    TimelineStore,
    WriteStat,
    now_ms,
)
from lakecore.write import Marker, create_marker

Clock = Callable[[], int]
ACTION: Action = "compaction"


def pending_compactions(store: TimelineStore, timeline: Timeline) -> list[Instant]:
    """Compactions requested or inflight and not claimed by a rollback."""
    return pending_of(store, timeline, ACTION)


def schedule_compaction(storage: Storage, config: TableConfig, lock: Lock,
                        strategy: CompactionStrategy = COMPACT_ALL, *,
                        clock: Clock = now_ms) -> CompactionPlan | None:
    """Plan a compaction and record it as `P.compaction.requested`; None when nothing needs it.
    Raises CompactionPending when another compaction is scheduled or running."""
    if config.table_type != "merge_on_read":
        raise NotMergeOnRead(f"table {config.name!r} is {config.table_type}; its writes already produce "
                             "base files, so there is nothing to compact")

    def make_plan(p: str, timeline: Timeline) -> CompactionPlan | None:
        operations = plan_compaction(view_for_services(storage, timeline), config, strategy)
        return CompactionPlan(p, operations, strategy.kind) if operations else None

    return schedule(storage, lock, ACTION, "compaction", "compact", make_plan, CompactionPending,
                    config_name=config.name, clock=clock)


def load_plan(storage: Storage, instant_time: str) -> CompactionPlan:
    """The plan of a scheduled compaction (to resume it from another process)."""
    store = TimelineStore(storage)
    return CompactionPlan.loads(store.read_plan(Instant(instant_time, ACTION)),
                                source=f"plan of compaction {instant_time}")


def execute_operation(storage: Storage, config: TableConfig, plan_instant: str, op: CompactionOperation,
                      write_token: str = "0-0-0") -> WriteStat:
    """Merge one planned slice into a new base file named with the plan's instant. Task-side: all
    arguments pickle. `config.schema` must cover every column of the planned files."""
    state = merge_slice(storage, config, op.paths(), has_base=op.base_file is not None,
                        instant_time=plan_instant)
    name = base_file_name(op.file_id, write_token, plan_instant)
    path = f"{op.partition}/{name}" if op.partition else name
    create_marker(storage, Marker(plan_instant, path, "create"))
    size, stats = write_data_file(storage, path, state, compression=config.compression,
                                  ids=base_schema(config))
    dead = tombstones(state)
    return WriteStat(op.partition, op.file_id, name, "base", state.num_rows - dead, dead, size,
                     base_instant=op.base_instant or _instant_of(op.base_file),
                     stats=stats.to_json())


def merge_slice(storage: Storage, config: TableConfig, paths: Sequence[str], *, has_base: bool,
                instant_time: str) -> pa.Table:
    """The base state of one file slice (its base file, if any, first, then its logs in order): one
    row per key per the table's merge mode, tombstones kept within the table's retention (as of
    `instant_time`, the rewriting instant), deleted column groups of live keys marked as deleted, in
    the base file schema (file schema plus op columns). Shared by every
    service that rewrites a slice into a base file (compaction, clustering)."""
    schema = file_schema(config)
    tables = read_files(storage, list(paths), [*schema.names, *op_columns(config)])
    state = purge_tombstones(merge_to_base(tables, merge_spec(config), schema, first_unique=has_base),
                             config, instant_time)
    return as_base_file(state, config)


def tombstones(state: pa.Table) -> int:
    return int(pc.sum(state.column(OP)).as_py() or 0)


def _instant_of(base_file: str | None) -> str | None:
    parsed = parse_data_file_name(base_file) if base_file else None
    return parsed.instant_time if parsed else None


def start_compaction(storage: Storage, config: TableConfig, plan: CompactionPlan, lock: Lock, *,
                  heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT) -> Instant | Running:
    """Driver side, before the tasks: the completed instant if the compaction is done already; else
    the run (the pending instant moved inflight, what an earlier attempt wrote deleted, and the config
    the tasks must use). Then `execute_operation(storage, run.config, P, op, token)` per operation,
    anywhere, and `commit_compaction` with the stats."""
    return resume(storage, TimelineStore(storage), config, plan.instant_time, ACTION, "compaction", lock,
                  heartbeat)


def commit_compaction(storage: Storage, lock: Lock, plan: CompactionPlan, run: Running,
                      stats: Sequence[WriteStat], *, clock: Clock = now_ms,
                      reconcile: bool = False) -> Instant:
    """Driver side, after the tasks: complete the compaction with the new base files. Raises
    ServiceRunning if this run lost its claim. `reconcile`: delete files of task attempts no stat
    reports first (engines that retry tasks)."""
    store = TimelineStore(storage)
    done = commit(storage, lock, store, run.inflight, "compaction", lambda timeline: CommitMetadata(
        ACTION, tuple(stats), store.latest_schema(timeline), {"strategy": plan.strategy}), clock, run=run,
        reported=[s.path for s in stats] if reconcile else None)
    assert done is not None
    return done


def run_compaction(storage: Storage, config: TableConfig, lock: Lock, plan: CompactionPlan, *,
                   workers: int = 4, clock: Clock = now_ms,
                   heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT) -> Instant:
    """Execute a scheduled compaction and complete it, tasks on a local thread pool. Resumes one left
    requested or inflight by a dead process (its partial files are deleted first, through its
    markers); returns the completed instant, also when it had completed already (deleting the
    markers a dead process left). ServiceRunning while another live process runs it."""
    run = start_compaction(storage, config, plan, lock, heartbeat=heartbeat)
    if isinstance(run, Instant):
        return run
    try:
        tokens = run.tokens(len(plan.operations))
        args = [(storage, run.config, plan.instant_time, op, t)
                for op, t in zip(plan.operations, tokens, strict=True)]
        stats = run_tasks(execute_operation, args, workers, "compact")
    except BaseException:
        run.release()  # the next run resumes it at once
        raise
    return commit_compaction(storage, lock, plan, run, stats, clock=clock)


def rollback_compaction(storage: Storage, lock: Lock, instant_time: str, *, clock: Clock = now_ms,
                        force: bool = False,
                        heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT) -> Instant | None:
    """Drop a pending compaction: delete its files (named by its markers), record a rollback, remove
    the requested/inflight instant. ServiceRunning while a live run executes it, unless `force`;
    None when a rollback already claimed it."""
    return rollback_pending(storage, lock, instant_time, ACTION, "compaction",
                            "roll writes back with Table.rollback", clock=clock, force=force,
                            heartbeat=heartbeat)
