"""The clean service: delete data files that no retained read needs, recorded as a `clean` instant.

    lazy rollback: roll back pending writes whose heartbeat expired (rollback_failed_writes); under
                   the lock, drop savepoint instants a dead process left pending; remove empty
                   marker directories older versions left (prune_marker_dirs)
    schedule:      lock -> reload timeline -> no clean pending? -> draw T -> plan (clean_plan.py)
                   -> create T.clean.requested (body: the plan) -> unlock
    execute:       T.clean.inflight -> delete the planned files (a missing file is fine)
    commit:        lock -> reload -> still inflight? -> complete T_C.clean (deleted files) -> unlock

A clean instant has no write stats, so no read changes: views are built from the write stats of
commit/deltacommit/compaction instants only. Deleting is idempotent, so a clean whose process died is
resumed by the next `run_clean`; one clean at a time, run by one process at a time (the run claim of
concurrency/liveness/runs.py, taken in the same locked section that picks or schedules the clean: a second
caller gets ServiceRunning while the first is alive). Planning under the lock is safe to act on later:
instants completing afterwards only add newer slices, so what was garbage stays garbage.
A time-travel read older than the retained points finds its files gone: `time_travel.check_readable`
names the clean that deleted them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from lakecore.concurrency import Lock, ensure_held, rollback_failed_writes
from lakecore.concurrency.liveness.heartbeat import (
    DEFAULT_HEARTBEAT,
    HeartbeatConfig,
    is_expired,
    last_sign_of_life,
    prune_aborted,
)
from lakecore.concurrency.liveness.runs import ServiceRun, forget
from lakecore.concurrency.rollback import claimed_by_rollbacks, completions_lost, is_pending_write
from lakecore.config import TableConfig
from lakecore.errors import InvalidInstantState
from lakecore.services.clean_plan import CleanPlan, CleanPolicy, plan_clean
from lakecore.services.clustering import load_clustering_plan, pending_clusterings
from lakecore.services.compaction import pending_compactions
from lakecore.services.compaction_plan import CompactionPlan
from lakecore.services.published import pinned_points
from lakecore.services.savepoint import drop_abandoned_savepoints
from lakecore.storage import Storage
from lakecore.timeline import (
    Action,
    CommitMetadata,
    Instant,
    State,
    Timeline,
    TimelineStore,
    next_instant_time,
    now_ms,
)
from lakecore.write import prune_marker_dirs

Clock = Callable[[], int]
ACTION: Action = "clean"
DEFAULT_POLICY = CleanPolicy()
ABORTED_RETENTION_MS = 7 * 24 * 3600 * 1000  # proofs of death of finished instants kept a week


def pending_cleans(store: TimelineStore, timeline: Timeline) -> list[Instant]:
    claimed = claimed_by_rollbacks(store, timeline)
    return [i for i in timeline.pending if i.action == ACTION and i.requested_time not in claimed]


def _expired_writes(storage: Storage, store: TimelineStore, timeline: Timeline, heartbeat: HeartbeatConfig,
                    now: int) -> list[str]:
    """The dead writes the lazy rollback takes: not those whose completed file was lost
    (rollback.completion_lost), which it leaves for a human to decide."""
    claimed = claimed_by_rollbacks(store, timeline)
    expired = [i for i in timeline.pending
               if is_pending_write(store, i) and i.requested_time not in claimed
               and is_expired(last_sign_of_life(storage, i.requested_time), now, heartbeat)]
    lost = {i.requested_time for i, _ in completions_lost(storage, expired)}
    return [i.requested_time for i in expired if i.requested_time not in lost]


def _in_use(storage: Storage, store: TimelineStore, timeline: Timeline) -> set[str]:
    """Files that pending compactions and clusterings will read."""
    paths: set[str] = set()
    for c in pending_compactions(store, timeline):
        plan = CompactionPlan.loads(store.read_plan(c), source=f"plan of compaction {c.requested_time}")
        paths |= {p for op in plan.operations for p in op.paths()}
    for c in pending_clusterings(store, timeline):
        paths |= {p for op in load_clustering_plan(storage, c.requested_time).operations for p in op.paths()}
    return paths


def _plan(storage: Storage, store: TimelineStore, timeline: Timeline, policy: CleanPolicy, now: int,
          heartbeat: HeartbeatConfig, instant_time: str = "") -> CleanPlan:
    return plan_clean(timeline, store.metadata, policy, now,
                      expired=_expired_writes(storage, store, timeline, heartbeat, now),
                      in_use=_in_use(storage, store, timeline), published=pinned_points(storage),
                      instant_time=instant_time)


def load_clean_plan(storage: Storage, instant: Instant) -> CleanPlan:
    return CleanPlan.loads(TimelineStore(storage).read_plan(instant),
                           source=f"plan of clean {instant.requested_time}")


def run_clean(storage: Storage, config: TableConfig, lock: Lock, policy: CleanPolicy = DEFAULT_POLICY, *,
              dry_run: bool = True, heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT,
              clock: Clock = now_ms) -> CleanPlan | Instant | None:
    """Clean the table per `policy`. Dry run (the default): the plan, nothing changed. Otherwise roll
    back expired writes, then schedule, execute and complete a clean; returns the completed instant,
    the plan of what it rolled back when nothing is left to delete (no operations, its `rollbacks`),
    or None when nothing was due. A pending clean is resumed instead of planning anew."""
    store = TimelineStore(storage)
    if dry_run:
        timeline = store.load()
        pending = pending_cleans(store, timeline)
        if pending:
            return load_clean_plan(storage, pending[0])
        plan = _plan(storage, store, timeline, policy, clock(), heartbeat)
        return plan if plan.operations or plan.rollbacks else None
    rolled_back = rollback_failed_writes(storage, lock, heartbeat, clock=clock)
    loaded = store.load()
    prune_marker_dirs(storage, {i.requested_time for i in loaded.pending}, loaded.newest_time())
    with lock:
        timeline = store.load()
        drop_abandoned_savepoints(storage, lock, timeline)
        pending = pending_cleans(store, timeline)
        if pending:
            target, plan = pending[0], load_clean_plan(storage, pending[0])
        else:
            t = next_instant_time(clock(), timeline.newest_time())
            plan = replace(_plan(storage, store, timeline, policy, clock(), heartbeat, t),
                           rollbacks=tuple(sorted(rolled_back)))
            if not plan.operations:   # nothing to delete: what it rolled back, or nothing was due
                return plan if plan.rollbacks else None
            target = Instant(t, ACTION)
        run = ServiceRun.claim(storage, lock, target.requested_time, f"clean {target.requested_time}",
                               heartbeat, now=clock())
        if not pending:
            target = store.create_requested(target, plan.dumps())
    with run:
        done = _execute(storage, lock, store, target, plan, clock, config, run)
    forget(storage, target.requested_time)
    prune_aborted(storage, {i.requested_time for i in store.load().pending}, clock(), ABORTED_RETENTION_MS)
    return done


def _delete_file(storage: Storage, path: str) -> None:
    storage.delete(path)  # a missing file is fine: a resumed clean deletes again


def _execute(storage: Storage, lock: Lock, store: TimelineStore, instant: Instant, plan: CleanPlan,
             clock: Clock, config: TableConfig, run: ServiceRun) -> Instant:
    inflight = store.transition_inflight(instant) if instant.state is State.REQUESTED else instant
    for path in plan.files:
        _delete_file(storage, path)
    meta = CommitMetadata(ACTION, (), None, plan.record())
    t = instant.requested_time
    with lock:
        run.ensure_owned(lock, f"completing clean {t}")
        timeline = store.load()
        now = timeline.find(t)
        if now is not None and now.is_completed:
            return now
        if now is None or now.state is not State.INFLIGHT:
            raise InvalidInstantState(f"clean {t} of table {config.name!r} is no longer inflight ({now}); "
                                      "its deletions are done: run the clean again to record a new one")
        ensure_held(lock, f"completing clean {t}")
        return store.complete(inflight, next_instant_time(clock(), timeline.newest_time()), meta)
