"""Clustering: rewrite file groups' latest slices into one (sorted) base file each, as a replacecommit.

    schedule: lock -> reload timeline -> no clustering pending? -> draw P -> plan over the view of
              completed instants (clustering_plan.py) -> create P.replacecommit.requested (the plan)
              -> unlock
    execute:  per operation: merge the planned base + logs exactly as compaction does (merge mode,
              column groups, tombstones kept), sort by the sort columns (stable), marker, write ONE
              `<fileId>_<token>_<P>.parquet` in row groups of `row_group_rows`
    commit:   P.replacecommit.inflight ... lock -> reload -> still ours? -> any write completed after
              P that wrote a BASE file of one of our groups? then unlock, roll back, ClusteringConflict
              -> else complete (new bases as WriteStat(kind="base"), extra: replaced groups, sort
              columns) -> unlock -> delete markers

Why only base writers conflict: a new base named P takes every log completed after P (completion-time
slicing), so log appends of merge-on-read writers land on top of it, as with compaction. A base file
written after P (copy-on-write write, bulk insert) holds a state the clustering never saw; whichever
of the two commits second aborts (here, or in the writer's OCC check: occ.SLICE_REWRITES), so nothing
is lost. One clustering per table at a time; a crashed one is resumed by `run_clustering` or dropped
by `rollback_clustering`. Must not import the table facade or the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.concurrency import Lock, rollback_write, view_for_services
from lakecore.concurrency.conflicts.occ import Conflict, completed_since, find_conflicts
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.config import TableConfig
from lakecore.errors import ClusteringConflict, ClusteringPending
from lakecore.formats import write_data_file
from lakecore.layout import base_file_name
from lakecore.read.spec import base_schema
from lakecore.services.clustering_plan import (
    CLUSTER_SMALL_FILES,
    ClusteringOperation,
    ClusteringPlan,
    ClusteringStrategy,
    plan_clustering,
)
from lakecore.services.compaction import merge_slice, tombstones
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
ACTION: Action = "replacecommit"
OPERATION = "clustering"   # the commit metadata's operation (occ.SLICE_REWRITES knows it)


def pending_clusterings(store: TimelineStore, timeline: Timeline) -> list[Instant]:
    """Clusterings requested or inflight and not claimed by a rollback."""
    return pending_of(store, timeline, ACTION)


def schedule_clustering(storage: Storage, config: TableConfig, lock: Lock,
                        strategy: ClusteringStrategy = CLUSTER_SMALL_FILES, *,
                        clock: Clock = now_ms) -> ClusteringPlan | None:
    """Plan a clustering and record it as `P.replacecommit.requested`; None when no file group needs
    it. Raises ClusteringPending while another clustering is scheduled or running, and
    InvalidClusteringStrategy (before touching anything) for sort columns the table lacks."""
    strategy.check(config)

    def make_plan(p: str, timeline: Timeline) -> ClusteringPlan | None:
        operations = plan_clustering(view_for_services(storage, timeline), config, strategy)
        return ClusteringPlan(p, operations, strategy) if operations else None

    return schedule(storage, lock, ACTION, "clustering", "cluster", make_plan, ClusteringPending,
                    config_name=config.name, clock=clock)


def load_clustering_plan(storage: Storage, instant_time: str) -> ClusteringPlan:
    """The plan of a scheduled clustering (to resume it from another process)."""
    store = TimelineStore(storage)
    return ClusteringPlan.loads(store.read_plan(Instant(instant_time, ACTION)),
                                source=f"plan of clustering {instant_time}")


def sort_state(state: pa.Table, sort_columns: Sequence[str]) -> pa.Table:
    """`state` stably sorted by `sort_columns` (ascending, nulls last); unchanged without columns."""
    if not sort_columns or state.num_rows < 2:
        return state
    order = pc.sort_indices(state, sort_keys=[(c, "ascending", "at_end") for c in sort_columns])
    return state.take(order)


def execute_operation(storage: Storage, config: TableConfig, plan_instant: str, op: ClusteringOperation,
                      strategy: ClusteringStrategy, write_token: str = "0-0-0") -> WriteStat:
    """Rewrite one planned slice into one base file named with the plan's instant. Task-side: all
    arguments pickle. `config.schema` must cover every column of the planned files."""
    state = sort_state(merge_slice(storage, config, op.paths(), has_base=op.base_file is not None,
                                   instant_time=plan_instant), strategy.sort_columns)
    name = base_file_name(op.file_id, write_token, plan_instant)
    path = f"{op.partition}/{name}" if op.partition else name
    create_marker(storage, Marker(plan_instant, path, "create"))
    size, stats = write_data_file(storage, path, state, compression=config.compression,
                                  row_group_size=strategy.row_group_rows, ids=base_schema(config))
    dead = tombstones(state)
    return WriteStat(op.partition, op.file_id, name, "base", state.num_rows - dead, dead, size,
                     base_instant=op.base_instant, stats=stats.to_json())


def base_writes_since(store: TimelineStore, timeline: Timeline, clustering: Instant,
                      groups: frozenset[tuple[str, str]]) -> list[Conflict]:
    """Writes completed after the clustering was requested that wrote a base file of its groups."""
    return find_conflicts(clustering, groups, completed_since(timeline, clustering), store.metadata,
                          only_base_writers=True)


def start_clustering(storage: Storage, config: TableConfig, plan: ClusteringPlan, lock: Lock, *,
                  heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT) -> Instant | Running:
    """Driver side, before the tasks: the completed instant if the clustering is done already; else
    the run (see compaction.start_compaction). Then `execute_operation(storage, run.config, P, op,
    plan.strategy, token)` per operation, anywhere, and `commit_clustering` with the stats."""
    return resume(storage, TimelineStore(storage), config, plan.instant_time, ACTION, "clustering", lock,
                  heartbeat)


def commit_clustering(storage: Storage, lock: Lock, plan: ClusteringPlan, run: Running,
                      stats: Sequence[WriteStat], *, clock: Clock = now_ms,
                      reconcile: bool = False) -> Instant:
    """Driver side, after the tasks: complete the clustering, or, when a write completed since P
    rewrote a base file of one of its groups, roll it back and raise ClusteringConflict. Raises
    ServiceRunning if this run lost its claim. `reconcile`: delete files of task attempts no stat
    reports first (engines that retry tasks)."""
    store = TimelineStore(storage)
    conflicts: list[Conflict] = []

    def metadata(timeline: Timeline) -> CommitMetadata | None:
        conflicts.extend(base_writes_since(store, timeline, run.inflight, plan.file_groups))
        return None if conflicts else \
            CommitMetadata(OPERATION, tuple(stats), store.latest_schema(timeline), clustering_extra(plan))

    done = commit(storage, lock, store, run.inflight, "clustering", metadata, clock, run=run,
                  reported=[s.path for s in stats] if reconcile else None)
    if done is None:
        rollback_write(storage, lock, run.inflight, clock=clock)
        raise ClusteringConflict.of(plan.instant_time, conflicts)
    return done


def run_clustering(storage: Storage, config: TableConfig, lock: Lock, plan: ClusteringPlan, *,
                   workers: int = 4, clock: Clock = now_ms,
                   heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT) -> Instant:
    """Execute a scheduled clustering and complete it, tasks on a local thread pool. Resumes one left
    requested or inflight by a dead process (its partial files are deleted first, through its
    markers); returns the completed instant, also when it had completed already (deleting the markers
    a dead process left). Raises ClusteringConflict (after rolling the clustering back) when a write
    completed meanwhile rewrote a base file of one of its groups; ServiceRunning while another live
    process runs it."""
    run = start_clustering(storage, config, plan, lock, heartbeat=heartbeat)
    if isinstance(run, Instant):
        return run
    try:
        args = [(storage, run.config, plan.instant_time, op, plan.strategy, t)
                for op, t in zip(plan.operations, run.tokens(len(plan.operations)), strict=True)]
        stats = run_tasks(execute_operation, args, workers, "cluster")
    except BaseException:
        run.release()  # the next run resumes it at once
        raise
    return commit_clustering(storage, lock, plan, run, stats, clock=clock)


def clustering_extra(plan: ClusteringPlan) -> dict[str, object]:
    """What a completed clustering records besides its write stats (repair rebuilds it from the plan)."""
    replaced = [{"partition": o.partition, "file_id": o.file_id, "base_instant": o.base_instant,
                 "files": o.paths()} for o in plan.operations]
    return {"replaced": replaced, "sort_columns": list(plan.strategy.sort_columns),
            "strategy": plan.strategy.to_json()}


def rollback_clustering(storage: Storage, lock: Lock, instant_time: str, *, clock: Clock = now_ms,
                        force: bool = False,
                        heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT) -> Instant | None:
    """Drop a pending clustering: delete its files (named by its markers), record a rollback, remove
    the requested/inflight instant. ServiceRunning while a live run executes it, unless `force`;
    None when a rollback already claimed it."""
    return rollback_pending(storage, lock, instant_time, ACTION, "clustering", "roll writes back with "
                            "Table.rollback, compactions with rollback_compaction", clock=clock,
                            force=force, heartbeat=heartbeat)
