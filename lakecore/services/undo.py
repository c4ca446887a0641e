"""Undoing completed instants: rollback of the latest completed write, and restore to a savepoint.

Both are one protocol, an *undo*: an instant (`rollback` or `restore`) whose plan names the completed
instants to undo (by timeline file name) and the data files they wrote (from their write stats).

    plan:     lock -> reload -> checks (no live writer, nothing that needs the undone instants)
              -> draw U -> create U.<rollback|restore>.requested (body: the plan) -> unlock
    complete: U inflight ... lock -> reload -> no pending write? -> complete U_C (extra: the plan)
              -> delete the undone instants' files, newest first (requested, inflight, completed
              last) -> unlock
    finish:   delete the undone instants' marker dirs (left by a process killed after completing
              one), then the planned data files (a missing file is fine)

Readers build views from completed instants' write stats only, so an undone instant stops counting
the moment its completed file goes; deleting newest first (under the lock) means a reader listing
meanwhile sees a prefix of the history — some earlier time-travel state, whose files all still exist
because data files go only after every undone instant file is gone. Crash safety: before U completes
nothing was changed (a rerun resumes the pending U); once U completes it durably lists everything to
remove, and every later step is an idempotent delete, so a rerun finishes any completed undo whose
instants or files are still there. U stays on the timeline, so instant times remain monotonic.
Plans name targets under `undone`, never `rolled_back`, so `resume_rollbacks` (pending writes only)
leaves them alone. The table should be quiet meanwhile (as for Hudi's restore): live writers are
refused at planning and at completion; a writer that begins in between makes completion refuse.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from lakecore.concurrency import Lock, ensure_held, rollback_write, view_of
from lakecore.concurrency.liveness.heartbeat import DEFAULT_HEARTBEAT, HeartbeatConfig, is_alive_here
from lakecore.concurrency.rollback import claimed_by_rollbacks, completions_lost, is_pending_write
from lakecore.config import TableConfig
from lakecore.errors import (
    CorruptMetadata,
    FilesCleaned,
    InstantNotFound,
    InvalidInstantState,
    RollbackBlocked,
    WriterLive,
)
from lakecore.services.clean_plan import DATA_WRITES
from lakecore.services.savepoint import find_savepoint, savepoints
from lakecore.storage import Storage
from lakecore.timeline import (
    TIMELINE_DIR,
    WRITE_ACTIONS,
    CommitMetadata,
    Instant,
    State,
    Timeline,
    TimelineStore,
    next_instant_time,
    now_ms,
    parse_file_name,
    pending_overwrite,
)
from lakecore.write.markers import delete_markers

Clock = Callable[[], int]
UndoAction = Literal["rollback", "restore"]


@dataclass(frozen=True)
class UndoPlan:
    action: UndoAction
    undone: tuple[str, ...]            # completed instants' timeline file names, newest first
    files: tuple[str, ...]             # data files they wrote, sorted
    rolled_back_pending: tuple[str, ...] = ()   # pending instants rolled back before (restore)
    savepoint: str | None = None       # restore: the savepoint instant and the instant it pins
    restored_to: str | None = None
    live: str | None = None            # a dry run's pending instant: who runs it, if alive (not persisted)

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "undone": list(self.undone), "files": list(self.files),
                "rolled_back_pending": list(self.rolled_back_pending), "savepoint": self.savepoint,
                "restored_to": self.restored_to}

    @classmethod
    def from_json(cls, d: Any, *, source: str) -> UndoPlan:
        try:
            return cls(d["action"], tuple(str(x) for x in d["undone"]), tuple(str(x) for x in d["files"]),
                       tuple(str(x) for x in d.get("rolled_back_pending", ())), d.get("savepoint"),
                       d.get("restored_to"))
        except (KeyError, TypeError, AttributeError) as exc:
            raise CorruptMetadata(f"{source} is not an undo plan ({exc!r}); run `weir table repair TABLE "
                                  "--run` to quarantine the pending instant, then run it again") from exc


def _undo_plan(store: TimelineStore, instant: Instant) -> UndoPlan | None:
    """The undo plan an instant carries; None for rollbacks of pending writes and other actions."""
    if instant.action not in ("rollback", "restore"):
        return None
    if instant.is_completed:
        body: Any = dict(store.metadata(instant).extra)
    else:
        try:
            body = json.loads(store.read_plan(instant) or b"{}")
        except (FileNotFoundError, ValueError, UnicodeDecodeError):
            return None
    if not isinstance(body, dict) or "undone" not in body:
        return None
    return UndoPlan.from_json(body, source=f"plan of {instant}")


def _stats_files(store: TimelineStore, instants: list[Instant]) -> tuple[str, ...]:
    return tuple(sorted({st.path for i in instants for st in store.metadata(i).write_stats}))


def _pending_writes(store: TimelineStore, timeline: Timeline) -> list[Instant]:
    claimed = claimed_by_rollbacks(store, timeline)
    return [i for i in timeline.pending if is_pending_write(store, i) and i.requested_time not in claimed]


def refuse_live(storage: Storage, store: TimelineStore, timeline: Timeline, heartbeat: HeartbeatConfig,
                now: int, what: str) -> None:
    """WriterLive when a pending write's writer is alive (its heartbeat, or its process on this machine)."""
    for i in _pending_writes(store, timeline):   # an aborted write can never commit: not live
        if is_alive_here(storage, i.requested_time, now, heartbeat):
            raise WriterLive(f"writer {i.requested_time} ({i.action}) is live on the table; {what} needs a "
                             "quiet table: rerun after it commits or dies")


def refuse_lost(storage: Storage, store: TimelineStore, timeline: Timeline, what: str) -> None:
    """RollbackBlocked when a pending write completed and lost its completed file (rollback.completion_lost):
    rolling it back with the other pending writes would drop rows a reader saw, so a human decides
    first, as `weir table check` says."""
    found = completions_lost(storage, _pending_writes(store, timeline))
    if found:
        (i, files), uri = found[0], storage.uri
        t = i.requested_time
        raise RollbackBlocked(
            f"write {t} looks pending, but its {len(files)} data file(s) have no markers: it "
            f"completed and its completed instant file was lost; {what} would roll it back and drop "
            "its rows. "
            f"Decide first (`weir table check {uri}` says more): if it completed, `weir table repair "
            f"{uri} --run --complete-lost {t}` writes the file again; if it did not, `weir table "
            f"rollback {uri} {t} --yes` drops it; then run it again")


def _delete_file(storage: Storage, path: str) -> None:
    storage.delete(path)  # a missing file is fine: a resumed undo deletes again


def _delete_instant(storage: Storage, name: str) -> None:
    inst = parse_file_name(name)
    if inst is None:
        return
    for f in (inst.requested_file(), inst.inflight_file(), name):  # completed last: it alone counts
        storage.delete(f"{TIMELINE_DIR}/{f}")


def _run_undo(storage: Storage, lock: Lock, store: TimelineStore, instant: Instant, plan: UndoPlan,
              clock: Clock) -> Instant:
    """Complete (or finish) an undo instant; idempotent, so it also resumes one a dead process left."""
    done = instant
    if not instant.is_completed:
        inflight = store.transition_inflight(instant) if instant.state is State.REQUESTED else instant
        with lock:
            timeline = store.load()
            now = timeline.find(instant.requested_time)
            if now is not None and now.is_completed:
                done = now
            else:
                claimed = claimed_by_rollbacks(store, timeline)
                blocking = [i for i in timeline.pending if i.action in WRITE_ACTIONS
                            and i.requested_time not in claimed]
                if blocking:
                    raise WriterLive(f"write {blocking[0].requested_time} began during {instant.action} "
                                     f"{instant.requested_time}; let it commit or roll it back, then rerun")
                ensure_held(lock, f"completing {instant.action} {instant.requested_time}")
                done = store.complete(inflight, next_instant_time(clock(), timeline.newest_time()),
                                      CommitMetadata(instant.action, (), None, plan.to_json()))
            for name in plan.undone:
                _delete_instant(storage, name)
    elif _still_on_timeline(store.load(), plan):
        with lock:
            for name in plan.undone:
                _delete_instant(storage, name)
    for name in plan.undone:  # before the data files: a rerun comes while any of those is left
        undone = parse_file_name(name)
        if undone is not None:
            delete_markers(storage, undone.requested_time)
    for path in plan.files:
        _delete_file(storage, path)
    return done


def _still_on_timeline(timeline: Timeline, plan: UndoPlan) -> list[str]:
    """The undone instants still on the timeline (any state)."""
    times = {i.requested_time for i in timeline.instants}
    return [n for n in plan.undone if (p := parse_file_name(n)) is not None and p.requested_time in times]


def resume_undos(storage: Storage, lock: Lock, *, clock: Clock = now_ms) -> list[Instant]:
    """Finish every undo a dead process left: pending ones, and completed ones whose instants or
    files are still there. Returns the instants finished."""
    store = TimelineStore(storage)
    out = []
    timeline = store.load()
    for i in timeline.instants:
        plan = _undo_plan(store, i)
        if plan is None:
            continue
        if i.is_completed and not _still_on_timeline(timeline, plan) and not any(
                map(storage.exists, plan.files)):
            continue  # finished
        out.append(_run_undo(storage, lock, store, i, plan, clock))
    return out


# -- rollback of the latest completed write ------------------------------------------------------


def rollback_completed(storage: Storage, config: TableConfig, lock: Lock, instant_time: str, *,
                       heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT, dry_run: bool = False,
                       clock: Clock = now_ms) -> Instant | UndoPlan:
    """Undo a completed write instant that nothing has built on: delete its files, record a completed
    rollback, drop its instant. A data write (commit, deltacommit) can be undone while no later
    instant wrote a base file of its file groups (later log files are independent deltas, they stay);
    a table service instant only while it is the latest write. Refuses (RollbackBlocked) then, and
    when a pending compaction or clustering, a live savepoint or a clean needs it; WriterLive while a
    writer is live. `dry_run`: the checks and the plan (instant, files to delete), nothing changed."""
    for u in ([] if dry_run else resume_undos(storage, lock, clock=clock)):
        plan = _undo_plan(TimelineStore(storage), u)
        if plan is not None and any(n.startswith(f"{instant_time}_") for n in plan.undone):
            return u
    store = TimelineStore(storage)
    with lock:
        timeline = store.load()
        target = timeline.find(instant_time)
        if target is None:
            for u in timeline.completed:
                plan = _undo_plan(store, u)
                if plan is not None and any(n.startswith(f"{instant_time}_") for n in plan.undone):
                    return u  # undone already
            raise InstantNotFound(f"no instant {instant_time} on table {config.name!r}; list instants with "
                                  "`weir table timeline`")
        if not target.is_completed or target.action not in WRITE_ACTIONS:
            raise InvalidInstantState(f"{target} is not a completed write; roll back pending writes with "
                                      "Table.rollback")
        refuse_live(storage, store, timeline, heartbeat, clock(), f"rolling back {instant_time}")
        _check_latest(storage, store, timeline, target, config.name)
        plan = UndoPlan("rollback", (target.file_name,), _stats_files(store, [target]))
        if dry_run:
            return plan
        u = store.create_requested(Instant(next_instant_time(clock(), timeline.newest_time()), "rollback"),
                                   json.dumps(plan.to_json()).encode())
    return _run_undo(storage, lock, store, u, plan, clock)


def rollback_blocker(storage: Storage, timeline: Timeline, target: Instant) -> str | None:
    """Why the completed write `target` cannot be rolled back alone now (the reason only), or None:
    the checks rollback_completed makes under the lock, made read-only (`weir table check`)."""
    try:
        _check_latest(storage, TimelineStore(storage), timeline, target, storage.uri)
    except RollbackBlocked as exc:
        return str(exc).split("; ")[0].split(": roll back")[0]
    return None


def _drops(instant: Instant) -> str:
    """What rolling back `instant` first costs, said beside that remedy."""
    if instant.action in DATA_WRITES:
        return f" (which drops what {instant.requested_time} wrote: write its input again after)"
    return ""


def _check_latest(storage: Storage, store: TimelineStore, timeline: Timeline, target: Instant,
                  table: str) -> None:
    after = target.completion_time or ""
    groups = store.metadata(target).file_groups
    for i in reversed(timeline.completed):
        if i.action not in WRITE_ACTIONS or (i.completion_time or "") <= after:
            continue
        if target.action not in DATA_WRITES and \
                (target.action != "compaction" or i.action not in DATA_WRITES):
            raise RollbackBlocked(f"{i.action} {i.requested_time} completed after {target.action} "
                                  f"{target.requested_time}; a table service instant can be rolled back only "
                                  f"while it is the latest write of table {table!r} (a compaction also "
                                  "before later data writes that wrote only log files of its file groups): "
                                  f"roll back {i.requested_time} first{_drops(i)}, or restore to a savepoint")
        # later log files of the same file groups are independent deltas: the target's can go (a
        # compaction's too: without its base they join the slice it merged, whose files stay until a
        # clean, checked below, so the table reads the same); a later BASE file of one of its groups
        # holds the target's data, so it cannot
        stats = store.metadata(i).write_stats
        rebased = {(s.partition, s.file_id) for s in stats if s.kind == "base"} & groups
        if rebased:
            what = "compacted" if i.action == "compaction" else "rewrote"
            raise RollbackBlocked(f"{i.action} {i.requested_time} {what} its file group(s) "
                                  f"{_groups(rebased)} after it (the data is in a later base file): roll "
                                  f"back {i.requested_time} first{_drops(i)}, or restore to a savepoint")
    for i in timeline.pending:
        if i.action == "clean" and target.action == "compaction" and i.requested_time > after:
            raise RollbackBlocked(f"clean {i.requested_time} is pending and may delete the files "
                                  f"compaction {target.requested_time} merged, which the table needs "
                                  "without it; let the clean finish (`weir table clean URI --run`), then "
                                  "rerun")
        if i.action == "replacecommit" and pending_overwrite(store, i) is not None:
            raise RollbackBlocked(f"overwrite {i.requested_time} is pending and replaces file groups after "
                                  f"{target.requested_time}; let it commit or roll it back (Table.rollback), "
                                  "then rerun")
        if i.action in ("compaction", "replacecommit") and i.requested_time > after:
            service, drop = ("compaction", "rollback_compaction") if i.action == "compaction" else \
                ("clustering", "rollback_clustering")
            raise RollbackBlocked(f"{service} {i.requested_time} is pending and may merge files of "
                                  f"{target.requested_time}; drop it with {drop}, then rerun")
    mine = set(_stats_files(store, [target]))
    for s in savepoints(timeline, store.metadata):
        pinned = timeline.find(s.savepointed)
        within = pinned is not None and (target.completion_time or "") <= (pinned.completion_time or "")
        if s.savepointed == target.requested_time or within or mine & set(s.files):
            # the savepoint keeps the table as of an instant the target is part of: rolling it back would
            # delete files the savepoint needs, and a restore to it could no longer bring them back
            raise RollbackBlocked(f"savepoint {s.instant_time} keeps the table as of {s.savepointed}, "
                                  f"which {target.requested_time} is part of; delete the savepoint first "
                                  f"(`weir table savepoint URI --delete {s.instant_time}`)")
    before = Timeline(tuple(i for i in timeline.instants if i != target), timeline.archived)
    _check_not_cleaned(store, timeline, _view_files(storage, before),
                       f"the snapshot before {target.requested_time}", RollbackBlocked)


def _groups(groups: set[tuple[str, str]]) -> str:
    return ", ".join(f"{fid} in {p or '(unpartitioned)'}" for p, fid in sorted(groups))


def _view_files(storage: Storage, timeline: Timeline) -> set[str]:
    return {f.path for s in view_of(storage, timeline).slices for f in s.files}


def _check_not_cleaned(store: TimelineStore, timeline: Timeline, needed: set[str], what: str,
                       error: type[RollbackBlocked] | type[FilesCleaned]) -> None:
    for c in timeline.completed:
        if c.action == "clean":
            gone = needed.intersection(store.metadata(c).extra.get("deleted", ()))
            if gone:
                raise error(f"clean {c.requested_time} deleted {len(gone)} file(s) {what} needs (e.g. "
                            f"{min(gone)}); it cannot be brought back: restore to a savepoint instead")


# -- restore to a savepoint ----------------------------------------------------------------------


def _restore_plan(storage: Storage, store: TimelineStore, timeline: Timeline, savepoint: str,
                  rolled_back: tuple[str, ...] = ()) -> UndoPlan:
    sp = find_savepoint(timeline, store.metadata, savepoint)
    bound = timeline.get(sp.savepointed).completion_time or ""
    undone = [i for i in timeline.completed
              if i.action in WRITE_ACTIONS and (i.completion_time or "") > bound]
    undone.sort(key=lambda i: (i.completion_time or "", i.requested_time), reverse=True)
    _check_not_cleaned(store, timeline, set(sp.files), f"savepoint {sp.instant_time}", FilesCleaned)
    files = tuple(f for f in _stats_files(store, undone) if f not in set(sp.files))
    claimed = claimed_by_rollbacks(store, timeline)
    pending = tuple(i.requested_time for i in timeline.pending
                    if i.action in WRITE_ACTIONS and i.requested_time not in claimed)
    return UndoPlan("restore", tuple(i.file_name for i in undone), files,
                    tuple(sorted(set(rolled_back) | set(pending))), sp.instant_time, sp.savepointed)


def restore(storage: Storage, config: TableConfig, lock: Lock, savepoint_instant: str, *,
            dry_run: bool = True, heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT,
            clock: Clock = now_ms) -> UndoPlan | Instant | None:
    """Make the table read exactly as at the savepoint: roll back pending writes and compactions,
    undo every write and compaction completed after the savepointed instant (recorded as a completed
    `restore` instant). Dry run (the default): the plan, nothing changed. Returns the completed
    restore, or None when there is nothing to undo. Raises WriterLive while a writer is live."""
    store = TimelineStore(storage)
    timeline = store.load()
    what = f"restoring savepoint {savepoint_instant}"
    if dry_run:
        plan = _restore_plan(storage, store, timeline, savepoint_instant)
        refuse_lost(storage, store, timeline, what)
        return plan
    resumed = [u for u in resume_undos(storage, lock, clock=clock) if u.action == "restore"]
    timeline = store.load()
    find_savepoint(timeline, store.metadata, savepoint_instant)
    refuse_live(storage, store, timeline, heartbeat, clock(), what)
    refuse_lost(storage, store, timeline, what)
    claimed = claimed_by_rollbacks(store, timeline)
    rolled_back = []
    for i in timeline.pending:
        if (i.action in WRITE_ACTIONS and i.requested_time not in claimed
                and rollback_write(storage, lock, i, clock=clock, refuse_live=heartbeat) is not None):
            rolled_back.append(i.requested_time)
    with lock:
        timeline = store.load()
        refuse_live(storage, store, timeline, heartbeat, clock(), f"restoring savepoint {savepoint_instant}")
        plan = _restore_plan(storage, store, timeline, savepoint_instant, tuple(rolled_back))
        if not plan.undone and not plan.rolled_back_pending:
            return resumed[-1] if resumed else None
        u = store.create_requested(Instant(next_instant_time(clock(), timeline.newest_time()), "restore"),
                                   json.dumps(plan.to_json()).encode())
    return _run_undo(storage, lock, store, u, plan, clock)
