"""Rolling back failed writes: the instant's files (found through its markers) are deleted, a
rollback instant records what was removed, and the pending instant disappears.

A rollback first CLAIMS its target under the table lock: it re-reads the timeline, checks that the
target is still pending (and, for lazy cleanup, that its writer is dead; otherwise that it is not
live unless forced), records the target's proof of death (`.weir/aborted/<T>`) and creates the
rollback's requested instant naming the target. A writer completing its instant checks, under the
same lock, that its instant is still inflight, that no rollback claimed it and that it has no proof
of death — so a slow writer and the cleaner can never both succeed. The rollback completes under
the lock together with removing the target's requested/inflight files, so the invariant holds at
every point: once a rollback of T is pending or completed, T never completes.

A pending write whose data files have no markers completed: a file's marker is made before the file,
a write's markers are deleted only after its completed instant file is written, and a rollback
deletes the files before the markers. Its completed file was lost (deleted by hand, a partial restore
from a backup). The lazy cleanup never rolls such a write back (`completion_lost`): `weir table check`
reports it and `weir table repair` writes its completed file again (services/repair.py). Rolled back by
name (`weir table rollback T`: `drop_lost`), it is dropped: its data files, which no marker names, are
listed in the rollback's plan and deleted.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from lakecore.concurrency.liveness.heartbeat import (
    HeartbeatConfig,
    delete_heartbeat,
    delete_writer_record,
    is_aborted,
    is_alive_here,
    is_expired,
    last_sign_of_life,
    mark_aborted,
)
from lakecore.concurrency.locks.protocol import Lock, ensure_held
from lakecore.errors import CorruptMetadata, InvalidInstantState, ServiceRunning, WriterLive
from lakecore.layout.listing import data_files
from lakecore.storage import FileInfo, Storage
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
from lakecore.write.markers import delete_markers, list_markers

Clock = Callable[[], int]
TABLE_SERVICES = frozenset({"compaction", "replacecommit"})  # rolled back by their own services
# run under a run claim (liveness/runs.py)
SERVICE_ACTIONS = frozenset({"compaction", "replacecommit", "clean"})

log = logging.getLogger(__name__)
_LOST: set[tuple[str, str]] = set()  # (table URI, instant time): writes found completed, their file lost


def is_pending_write(store: TimelineStore, instant: Instant) -> bool:
    """A pending data write (rolled back like any write when its writer dies): a commit or
    deltacommit, or a replacecommit that is an overwrite, not a clustering (its requested body says)."""
    if instant.action not in WRITE_ACTIONS or instant.is_completed:
        return False
    return instant.action not in TABLE_SERVICES or pending_overwrite(store, instant) is not None


def completion_lost(storage: Storage, instant: Instant,
                    files: Mapping[str, Mapping[str, FileInfo]] | None = None) -> tuple[str, ...]:
    """The data files of the pending write `instant` when they prove it completed: it has files but
    no markers and no proof of death (a repair that gives a write up records one first). Empty when
    it may still be a failed write. Sound against a concurrent commit only when `instant` was seen
    pending after the markers were listed (under the table lock, or by loading the timeline again).
    `files`: a listing by instant (layout.listing.data_files) made before this call, to look in instead
    of listing the table. Costs a listing of the whole table when the write has no markers."""
    t = instant.requested_time
    if not is_pending_write(TimelineStore(storage), instant) or is_aborted(storage, t) \
            or (files is None and list_markers(storage, t)):  # the cheap answer first
        return ()
    found = tuple(sorted((data_files(storage) if files is None else files).get(t, {})))
    # markers listed after the files: a live writer makes a file's marker before the file, so one
    # listed has its marker listed here unless the write has completed or been rolled back since
    return found if found and not list_markers(storage, t) else ()


def completions_lost(storage: Storage, instants: list[Instant]) -> list[tuple[Instant, tuple[str, ...]]]:
    """`completion_lost` of each of `instants` that it finds, each with its data files: the table is listed
    once for them all, and only when one of them has no markers."""
    unmarked = [i for i in instants
                if not is_aborted(storage, i.requested_time) and not list_markers(storage, i.requested_time)]
    listing = data_files(storage) if unmarked else {}
    return [(i, files) for i in unmarked if (files := completion_lost(storage, i, listing))]


def lost_completions(storage: Storage, timeline: Timeline, heartbeat: HeartbeatConfig, now: int
                     ) -> tuple[str, ...]:
    """The pending writes of `timeline` that completed and lost their completed instant file
    (`completion_lost`), among those whose writer is dead: what a watcher (the operator) reports. Reads
    only. A write found so once is not listed again while it stays pending (nothing brings its markers
    back), so a table with one costs a listing once per process, not once per look."""
    store = TimelineStore(storage)
    dead = [i for i in timeline.pending
            if is_pending_write(store, i) and now - to_epoch_ms(i.requested_time) > heartbeat.timeout_ms
            and not is_aborted(storage, i.requested_time)
            and is_expired(last_sign_of_life(storage, i.requested_time), now, heartbeat)]
    if not dead:
        return ()
    known = [i.requested_time for i in dead if (storage.uri, i.requested_time) in _LOST]
    found = completions_lost(storage, [i for i in dead if (storage.uri, i.requested_time) not in _LOST])
    if found:
        again = store.load()   # completed meanwhile? (its markers go after its completed file)
        for i, files in found:
            if (now_pending := again.find(i.requested_time)) is not None and not now_pending.is_completed:
                _warn_lost(storage, i, files)
                known.append(i.requested_time)
    return tuple(sorted(known))


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


def abort_pending(storage: Storage, lock: Lock, instant_time: str, by: str,
                  details: Mapping[str, Any] | None = None, *, now: int | None = None,
                  lock_timeout: float | None = None) -> bool:
    """Record a pending instant's proof of death under the table lock (`heartbeat.mark_aborted`): it can
    never complete from then on, `weir table describe` shows it aborted, and the next writer (or the
    supervisor) rolls it back at once instead of after its heartbeat expires. For an instant that must
    stop (a conflict's loser) or whose process is known to be gone (a driver `weir run` stopped).
    False when it completed, or left the timeline, first; a proof recorded before stays as it was
    (True). `lock_timeout`: seconds to wait for the lock (LockTimeout after; None: the lock's own)."""
    store = TimelineStore(storage)
    lock.acquire(lock_timeout)
    try:
        target = store.load().find(instant_time)
        if target is None or target.is_completed:
            return False
        ensure_held(lock, f"aborting write {instant_time}")
        mark_aborted(storage, instant_time, by, now_ms() if now is None else now, details)
    finally:
        lock.release()
    return True


def rollback_write(storage: Storage, lock: Lock, instant: Instant, *, clock: Clock = now_ms,
                   only_if_expired: HeartbeatConfig | None = None,
                   refuse_live: HeartbeatConfig | None = None, by: str = "rollback",
                   drop_lost: bool = False) -> Instant | None:
    """Roll back a pending instant. With `only_if_expired`, do it only if its writer is (still, under
    the lock) dead; returns None when the target turned out alive or finished. With `refuse_live`,
    raise WriterLive (ServiceRunning for a table service run) if its writer is alive. Without either,
    roll back whatever runs it (a writer aborting its own instant, or a forced rollback). Returns None
    when another rollback claimed it already. `drop_lost` (a rollback asked for by name): a write whose
    completed file was lost (completion_lost) is dropped with its data files, which no marker names;
    the rollback's plan lists them, so a rollback resumed after a crash deletes them too."""
    store = TimelineStore(storage)
    t = instant.requested_time
    listing = None
    lost: tuple[str, ...] = ()
    if (only_if_expired is not None or drop_lost) and not is_aborted(storage, t):
        if only_if_expired is not None and (storage.uri, t) in _LOST:
            return None   # its completed file is lost: said once, left alone since
        if not list_markers(storage, t):   # the table's files, listed outside the lock (before the
            listing = data_files(storage)  # markers are listed again under it: completion_lost)
    with lock:
        timeline = store.load()
        target = timeline.find(t)
        if target is not None and target.is_completed:
            if only_if_expired is not None:
                return None
            raise InvalidInstantState(f"instant {t} is completed; rolling back completed instants is a "
                                      f"table service: `weir table rollback URI {t} --yes` (Table.rollback)")
        if t in claimed_by_rollbacks(store, timeline):
            return None  # another rollback is already on it
        if target is None:
            if only_if_expired is not None:
                return None
        elif only_if_expired is not None and _alive(storage, target, clock(), only_if_expired):
            return None
        elif only_if_expired is not None and (files := completion_lost(storage, target, listing)):
            _warn_lost(storage, target, files)
            return None
        elif refuse_live is not None and (who := _alive(storage, target, clock(), refuse_live)):
            service = target.action in SERVICE_ACTIONS and not is_pending_write(store, target)
            error = ServiceRunning if service else WriterLive
            raise error(f"{target.action} {t} is alive: {who}; stop it, or wait until its heartbeat expires "
                        f"({refuse_live.timeout_ms} ms after its last beat), or force the rollback if you "
                        "are sure its process is gone")
        elif target is not None and drop_lost and listing is not None:
            lost = completion_lost(storage, target, listing)   # its files, which no marker names
        ensure_held(lock, f"claiming instant {t} for a rollback")
        plan = {"rolled_back": t, "action": instant.action, **({"files": list(lost)} if lost else {})}
        # the claim: T can never complete from here on (a commit checks both), even if we die now. The
        # plan goes first: once T is marked aborted, completion_lost no longer finds its lost files
        rb = store.create_requested(Instant(next_instant_time(clock(), timeline.newest_time()), "rollback"),
                                    json.dumps(plan).encode())
        mark_aborted(storage, t, by, clock())
    return _execute(storage, lock, store, rb, t, instant.action, clock, lost)


def live_runner(storage: Storage, target: Instant, now: int, config: HeartbeatConfig) -> str | None:
    """Who runs the pending instant `target`, if alive (what a rollback without force refuses); None when
    it is dead or aborted."""
    return _alive(storage, target, now, config)


def _alive(storage: Storage, target: Instant, now: int, config: HeartbeatConfig) -> str | None:
    """Who runs the pending instant, if alive: a table service run holds a run claim (liveness/runs.py), a
    write beats its heartbeat."""
    t = target.requested_time
    if target.action in SERVICE_ACTIONS and not is_pending_write(TimelineStore(storage), target):
        from lakecore.concurrency.liveness.runs import live_run

        run = live_run(storage, t, now, config)
        return None if run is None else f"run by {run.describe()}"
    return "its writer's heartbeat is fresh" if is_alive_here(storage, t, now, config) else None


def _execute(storage: Storage, lock: Lock, store: TimelineStore, rb: Instant, target: str, action: str,
             clock: Clock, lost: tuple[str, ...] = ()) -> Instant:
    """The work of a claimed rollback (also resumes one whose process died half-way). `lost`: the data
    files of a write whose completed file was lost (no marker names them)."""
    mark_aborted(storage, target, f"rollback {rb.requested_time}", clock())  # a claim made before it existed
    if rb.state is State.REQUESTED:
        rb = store.transition_inflight(rb)
    deleted = sorted({m.data_path for m in list_markers(storage, target)} | set(lost))
    for path in deleted:
        storage.delete(path)
    meta = CommitMetadata("rollback", (), None,
                          {"rolled_back": target, "action": action, "deleted_files": deleted})
    with lock:
        timeline = store.load()
        ensure_held(lock, f"completing rollback {rb.requested_time}")
        for suffix in ("inflight", "requested"):  # the target leaves the timeline as the rollback lands
            storage.delete(f".weir/timeline/{target}.{action}.{suffix}")
        done = store.complete(rb, next_instant_time(clock(), timeline.newest_time()), meta)
    delete_markers(storage, target)
    delete_heartbeat(storage, target)
    delete_writer_record(storage, target)
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
            _execute(storage, lock, store, rb, target, str(plan.get("action", "deltacommit")), clock,
                     tuple(str(f) for f in plan.get("files", ())))
            done.append(target)
    return done


def rollback_failed_writes(storage: Storage, lock: Lock, heartbeat: HeartbeatConfig, *,
                           clock: Clock = now_ms, timeline: Timeline | None = None) -> list[str]:
    """Lazy cleanup: roll back every pending write whose writer is dead (heartbeat expired, or it
    aborted), newest first. Returns the instant times rolled back. Safe to run from any writer, the
    cleaner or the operator. `timeline`: a recent load to look in (every rollback re-checks under the
    lock)."""
    store = TimelineStore(storage)
    timeline = timeline or store.load()
    resumed = resume_rollbacks(storage, lock, heartbeat.timeout_ms, clock=clock, timeline=timeline)
    now = clock()
    pending = [i for i in timeline.pending if is_pending_write(store, i)]
    # a write's last sign of life is never before its start, so one started within the timeout is
    # alive unless it aborted (the common case: the other writers' current instants cost one stat)
    candidates = [i for i in pending
                  if (now - to_epoch_ms(i.requested_time) > heartbeat.timeout_ms
                      and (storage.uri, i.requested_time) not in _LOST  # said once, skipped since
                      and is_expired(last_sign_of_life(storage, i.requested_time), now, heartbeat))
                  or is_aborted(storage, i.requested_time)]
    done = list(resumed)
    for inst in sorted(candidates, key=lambda i: i.requested_time, reverse=True):
        try:
            if rollback_write(storage, lock, inst, clock=clock, only_if_expired=heartbeat) is not None:
                done.append(inst.requested_time)
        except CorruptMetadata as exc:
            log.warning("could not roll back the dead write %s of %s: %s", inst.requested_time, storage.uri,
                        exc)
    return done


def _warn_lost(storage: Storage, target: Instant, files: tuple[str, ...]) -> None:
    """Say once per process that a write's completed file is lost, and skip it from then on."""
    if (storage.uri, target.requested_time) in _LOST:
        return
    _LOST.add((storage.uri, target.requested_time))
    log.warning("write %s of %s looks pending, but its %d data file(s) have no markers: it completed and its "
                "completed instant file was lost. It is not rolled back; `weir table check %s` says how "
                "to write it again (`weir table repair ... --run --complete-lost %s`) or drop it",
                target.requested_time, storage.uri, len(files), storage.uri, target.requested_time)
