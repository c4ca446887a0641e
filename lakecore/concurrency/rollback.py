"""Rolling back failed writes: the instant's files (found through its markers) are deleted, a
rollback instant records what was removed, and the pending instant disappears.

A rollback first CLAIMS its target under the table lock: it re-reads the timeline, checks that the
target is still pending (and, for lazy cleanup, that its heartbeat is still expired), and creates the
rollback's requested instant naming the target. A writer completing its instant checks, under the
same lock, that no rollback claimed it — so a slow writer and the cleaner can never both succeed,
and a live writer (fresh heartbeat) is never rolled back.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from lakecore.concurrency.locks import Lock, ensure_held
from lakecore.errors import CorruptMetadata, InvalidInstantState
from lakecore.storage import Storage
from lakecore.timeline import (
    WRITE_ACTIONS,
    CommitMetadata,
    Instant,
    State,
    Timeline,
    TimelineStore,
    next_instant_time,
    now_ms,
    pending_overwrite,
    to_epoch_ms,
)
from lakecore.write.heartbeat import HeartbeatConfig, delete_heartbeat, is_expired, last_sign_of_life
from lakecore.write.markers import delete_markers, list_markers

Clock = Callable[[], int]
TABLE_SERVICES = frozenset({"compaction", "replacecommit"})  # rolled back by their own services


def is_pending_write(store: TimelineStore, instant: Instant) -> bool:
    """A pending data write (rolled back like any write when its writer dies): a commit or
    deltacommit, or a replacecommit that is an overwrite, not a clustering (its requested body says)."""
    if instant.action not in WRITE_ACTIONS or instant.is_completed:
        return False
    return instant.action not in TABLE_SERVICES or pending_overwrite(store, instant) is not None


def claimed_by_rollbacks(store: TimelineStore, timeline: Timeline) -> set[str]:
    """Instants that pending rollbacks have claimed (their plans name them)."""
    claimed = set()
    for i in timeline.pending:
        if i.action == "rollback":
            try:
                claimed.add(json.loads(store.read_plan(i) or b"{}").get("rolled_back", ""))
            except (FileNotFoundError, ValueError, UnicodeDecodeError):
                continue
    return claimed


def rollback_write(storage: Storage, lock: Lock, instant: Instant, *, clock: Clock = now_ms,
                   only_if_expired: HeartbeatConfig | None = None) -> Instant | None:
    """Roll back a pending write. With `only_if_expired`, do it only if the writer's heartbeat is
    (still, under the lock) expired; returns None when the target turned out alive or finished."""
    store = TimelineStore(storage)
    plan = json.dumps({"rolled_back": instant.requested_time, "action": instant.action}).encode()
    with lock:
        timeline = store.load()
        target = timeline.find(instant.requested_time)
        if target is not None and target.is_completed:
            if only_if_expired is not None:
                return None
            raise InvalidInstantState(f"instant {instant.requested_time} is completed; rolling back "
                                      "completed instants is a table service (weir table rollback)")
        if instant.requested_time in claimed_by_rollbacks(store, timeline):
            return None  # another rollback is already on it
        if only_if_expired is not None and (target is None or not is_expired(
                last_sign_of_life(storage, instant.requested_time), clock(), only_if_expired)):
            return None
        rb = store.create_requested(Instant(next_instant_time(clock(), timeline.newest_time()), "rollback"),
                                    plan)
    return _execute(storage, lock, store, rb, instant.requested_time, instant.action, clock)


def _execute(storage: Storage, lock: Lock, store: TimelineStore, rb: Instant, target: str, action: str,
             clock: Clock) -> Instant:
    """The work of a claimed rollback (also resumes one whose process died half-way)."""
    if rb.state is State.REQUESTED:
        rb = store.transition_inflight(rb)
    markers = list_markers(storage, target)
    for m in markers:
        storage.delete(m.data_path)
    meta = CommitMetadata("rollback", (), None,
                          {"rolled_back": target, "action": action,
                           "deleted_files": sorted(m.data_path for m in markers)})
    with lock:
        timeline = store.load()
        ensure_held(lock, f"completing rollback {rb.requested_time}")
        done = store.complete(rb, next_instant_time(clock(), timeline.newest_time()), meta)
    delete_markers(storage, target)
    delete_heartbeat(storage, target)
    for suffix in ("inflight", "requested"):
        storage.delete(f".weir/timeline/{target}.{action}.{suffix}")
    return done


def resume_rollbacks(storage: Storage, lock: Lock, older_than_ms: int, *, clock: Clock = now_ms,
                     timeline: Timeline | None = None) -> list[str]:
    """Finish rollbacks whose process died: pending rollback instants older than `older_than_ms`.
    `timeline`: a recent load to look in (each rollback re-checks under the lock)."""
    store = TimelineStore(storage)
    timeline = timeline or store.load()
    cutoff = next_instant_time(clock() - older_than_ms, None)
    done = []
    for rb in timeline.pending:
        if rb.action != "rollback" or rb.requested_time >= cutoff:
            continue
        try:
            plan = json.loads(store.read_plan(rb) or b"{}")
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            continue
        target = str(plan.get("rolled_back", ""))
        if target:
            _execute(storage, lock, store, rb, target, str(plan.get("action", "deltacommit")), clock)
            done.append(target)
    return done


def rollback_failed_writes(storage: Storage, lock: Lock, heartbeat: HeartbeatConfig, *,
                           clock: Clock = now_ms, timeline: Timeline | None = None) -> list[str]:
    """Lazy cleanup: roll back every pending write whose writer's heartbeat expired, newest first.
    Returns the instant times rolled back. Safe to run from any writer, cleaner or the operator.
    `timeline`: a recent load to look in (every rollback re-checks under the lock)."""
    store = TimelineStore(storage)
    timeline = timeline or store.load()
    resumed = resume_rollbacks(storage, lock, heartbeat.timeout_ms, clock=clock, timeline=timeline)
    now = clock()
    # a write's last sign of life is never before its start, so one started within the timeout is
    # alive without reading its heartbeat (the common case: the other writers' current instants)
    candidates = [i for i in timeline.pending
                  if i.action in WRITE_ACTIONS
                  and now - to_epoch_ms(i.requested_time) > heartbeat.timeout_ms
                  and is_pending_write(store, i)
                  and is_expired(last_sign_of_life(storage, i.requested_time), now, heartbeat)]
    done = list(resumed)
    for inst in sorted(candidates, key=lambda i: i.requested_time, reverse=True):
        try:
            if rollback_write(storage, lock, inst, clock=clock, only_if_expired=heartbeat) is not None:
                done.append(inst.requested_time)
        except CorruptMetadata:
            continue
    return done
