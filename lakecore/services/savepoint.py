"""Savepoints: a completed write instant pinned so that clean keeps every file its read needs, and
restore (rollback_completed.py) can bring the table back to it.

    create: lock -> reload -> drop abandoned savepoint instants -> target completed write? no clean
            pending? its files not cleaned? -> draw S -> S.savepoint.requested -> inflight -> complete
            S_C.savepoint (extra: savepointed T, every data file of the view as of T, comment; the
            dropped instants) -> unlock
    delete: lock -> reload -> drop abandoned ones -> S live? -> complete D_C.savepoint
            (extra: deleted_savepoint S) -> unlock

Instant files are immutable, so a deletion is a later savepoint instant naming the deleted one (the
timeline stays append-only: who pinned what, and when it was let go, stays auditable); the instant
times stay monotonic because nothing leaves the timeline. A savepoint is live while no deletion names
it and its savepointed instant is still completed (a restore to an older savepoint, or a rollback,
undoes it). Creation refuses while a clean is pending: that clean was planned without the savepoint.
`savepointed_files` is pure; clean planning keeps its result.

Both run wholly under the table lock, so a savepoint instant that a lock holder finds requested or
inflight was left by a process that died mid-way: it pins nothing (only completed savepoints count),
yet would stop archival (which halts at the oldest pending instant) for good. The next savepoint
creation or deletion, or clean, removes it (`drop_abandoned_savepoints`); new instant times are still
drawn above it, so instant times stay monotonic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lakecore.concurrency import Lock, ensure_held, view_of
from lakecore.concurrency.rollback import claimed_by_rollbacks
from lakecore.errors import CleanPending, FilesCleaned, InstantNotFound, InvalidInput, SavepointNotFound
from lakecore.storage import Storage
from lakecore.timeline import (
    TIMELINE_DIR,
    WRITE_ACTIONS,
    Action,
    CommitMetadata,
    Instant,
    Timeline,
    TimelineStore,
    next_instant_time,
    now_ms,
)

Clock = Callable[[], int]
ACTION: Action = "savepoint"


@dataclass(frozen=True)
class Savepoint:
    instant_time: str            # the savepoint instant's requested time
    savepointed: str             # the completed write instant it pins
    files: tuple[str, ...]       # every data file the view as of `savepointed` needs
    comment: str = ""


def savepoints(timeline: Timeline, metadata: Callable[[Instant], CommitMetadata]) -> list[Savepoint]:
    """The live savepoints, oldest first. Pure."""
    found: list[Savepoint] = []
    deleted: set[str] = set()
    for i in timeline.completed:
        if i.action != ACTION:
            continue
        extra = metadata(i).extra
        if "deleted_savepoint" in extra:
            deleted.add(str(extra["deleted_savepoint"]))
        elif "savepointed" in extra:
            files = tuple(str(f) for f in extra.get("files", ()))
            found.append(Savepoint(i.requested_time, str(extra["savepointed"]), files,
                                   str(extra.get("comment", ""))))
    done = {i.requested_time for i in timeline.completed}
    return [s for s in found if s.instant_time not in deleted and s.savepointed in done]


def savepointed_files(timeline: Timeline, metadata: Callable[[Instant], CommitMetadata]) -> set[str]:
    """Every data file a live savepoint needs: clean must keep them."""
    return {f for s in savepoints(timeline, metadata) for f in s.files}


def list_savepoints(storage: Storage) -> list[Savepoint]:
    store = TimelineStore(storage)
    return savepoints(store.load(), store.metadata)


def find_savepoint(timeline: Timeline, metadata: Callable[[Instant], CommitMetadata], time: str) -> Savepoint:
    """The live savepoint with instant time `time` (or pinning the write instant `time`)."""
    for s in savepoints(timeline, metadata):
        if time in (s.instant_time, s.savepointed):
            return s
    raise SavepointNotFound(f"no live savepoint {time} on the table; list them with `weir table savepoint "
                            "URI --list` (Python: table.maintenance.savepoints()); a deleted savepoint, or "
                            "one of an undone instant, is gone")


def drop_abandoned_savepoints(storage: Storage, lock: Lock, timeline: Timeline) -> list[str]:
    """Remove the savepoint instants a dead process left requested or inflight (inflight file first,
    as rollbacks remove pending instants); call under the table lock, with the timeline loaded under
    it. Returns their instant times."""
    dropped = [i for i in timeline.pending if i.action == ACTION]
    if dropped:
        ensure_held(lock, "dropping abandoned savepoint instants")
    for i in dropped:
        for name in (i.inflight_file(), i.requested_file()):
            storage.delete(f"{TIMELINE_DIR}/{name}")
    return [i.requested_time for i in dropped]


def create_savepoint(storage: Storage, lock: Lock, instant_time: str, *, comment: str = "",
                     dry_run: bool = False, clock: Clock = now_ms) -> Instant | Savepoint:
    """Pin the completed write instant `instant_time`; returns the completed savepoint instant (the
    existing one when the instant is savepointed already, unless `comment` differs from its:
    InvalidInput). `dry_run`: only the Savepoint it would record (the files it pins), nothing written."""
    store = TimelineStore(storage)
    with lock:
        timeline = store.load()  # its newest time bounds new instants, also above dropped ones
        dropped = [] if dry_run else drop_abandoned_savepoints(storage, lock, timeline)
        target = timeline.find(instant_time)
        if target is None or not target.is_completed or target.action not in WRITE_ACTIONS:
            what = f"is {target}, not a completed write instant" if target is not None else \
                "is no instant on the timeline"
            raise InstantNotFound(f"{instant_time} {what}; savepoint a "
                                  "completed commit, deltacommit or compaction (see `weir table timeline`)")
        for sp in savepoints(timeline, store.metadata):
            if sp.savepointed == instant_time:
                if comment and comment != sp.comment:   # the same call again is fine; a new comment is lost
                    raise InvalidInput(f"{instant_time} is savepointed already (savepoint {sp.instant_time}, "
                                       f"comment {sp.comment!r}), so the comment {comment!r} would be lost: "
                                       "delete that savepoint first to savepoint it again with this comment")
                return timeline.get(sp.instant_time)
        claimed = claimed_by_rollbacks(store, timeline)
        cleans = [i for i in timeline.pending if i.action == "clean" and i.requested_time not in claimed]
        if cleans:
            raise CleanPending(f"clean {cleans[0].requested_time} is pending and was planned without this "
                               "savepoint; finish it with run_clean, then create the savepoint")
        view = view_of(storage, timeline.as_of(instant_time))
        files = sorted({f.path for fs in view.slices for f in fs.files})
        for c in timeline.completed:
            if c.action == "clean":
                gone = set(files).intersection(store.metadata(c).extra.get("deleted", ()))
                if gone:
                    raise FilesCleaned(f"clean {c.requested_time} already deleted {len(gone)} file(s) the "
                                       f"read as of {instant_time} needs (e.g. {min(gone)}); savepoint a "
                                       "later instant")
        if dry_run:
            return Savepoint("", instant_time, tuple(files), comment)
        s = next_instant_time(clock(), timeline.newest_time())
        extra: dict[str, object] = {"savepointed": instant_time, "files": files, "comment": comment}
        if dropped:
            extra["dropped_pending"] = dropped
        meta = CommitMetadata(ACTION, (), None, extra)
        inflight = store.transition_inflight(store.create_requested(Instant(s, ACTION)))
        ensure_held(lock, f"completing savepoint {s}")
        return store.complete(inflight, next_instant_time(clock(), s), meta)


def delete_savepoint(storage: Storage, lock: Lock, savepoint_time: str, *, clock: Clock = now_ms) -> Instant:
    """Let a savepoint go (its files become cleanable): records a savepoint instant naming it."""
    store = TimelineStore(storage)
    with lock:
        timeline = store.load()
        dropped = drop_abandoned_savepoints(storage, lock, timeline)
        sp = find_savepoint(timeline, store.metadata, savepoint_time)
        d = next_instant_time(clock(), timeline.newest_time())
        extra: dict[str, object] = {"deleted_savepoint": sp.instant_time}
        if dropped:
            extra["dropped_pending"] = dropped
        meta = CommitMetadata(ACTION, (), None, extra)
        inflight = store.transition_inflight(store.create_requested(Instant(d, ACTION)))
        ensure_held(lock, f"deleting savepoint {sp.instant_time}")
        return store.complete(inflight, next_instant_time(clock(), d), meta)
