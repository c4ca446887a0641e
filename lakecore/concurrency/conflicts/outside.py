"""Conflict detection from outside the writers: what a supervisor (the operator) sees of a table's
live writes, which of them conflict, and how it stops a loser.

Early detection inside a writer (early.py) only checks the file groups that writer is about to
write, and only when it writes; a supervisor looks at every live write of the table at once, on a
short period, and decides for them. Same rules as the commit check (occ.py), applied to what the
markers say the writes are writing:

- optimistic tables: two live writes with markers in one file group conflict; a live write that
  holds a marker in a file group a write completed into since it started conflicts too (it would
  fail at its commit anyway: stopping it now saves the rest of its work);
- non-blocking tables: only base files against base files (log appends never conflict);
- single-writer tables, table services (compaction, clustering), overwrites: never (their checks
  are their own, at commit).

The loser is always the younger instant (a completed write always wins), so two supervisors, or a
supervisor and a writer's own early detection, never pick different losers. A write that loses
(to a completed write, or to an older live one) wins against nobody: it will never commit, so a
younger write sharing its file groups is not stopped for its sake, in the same scan as in later
ones (an aborted write is no longer live). `abort_loser` records
the decision as the loser's proof of death under the table lock, re-checking that the loser is still
pending: a loser that committed first is not aborted (the winner then meets the conflict at its own
commit, as without a supervisor). Must not delete data: the loser rolls itself back, or the dead-write
cleanup does once its process is gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lakecore.concurrency.conflicts.occ import CHECKED_ACTIONS, SLICE_REWRITES, completed_since
from lakecore.concurrency.liveness.heartbeat import (
    HeartbeatConfig,
    is_aborted,
    last_sign_of_life,
)
from lakecore.concurrency.locks.protocol import Lock
from lakecore.concurrency.rollback import abort_pending, claimed_by_rollbacks, is_pending_write
from lakecore.config import ConcurrencyMode
from lakecore.layout import parse_data_file_name
from lakecore.storage import Storage, join
from lakecore.timeline import Instant, Timeline, TimelineStore, now_ms, scope_of
from lakecore.write.markers import MARKERS_DIR, is_batch_file, parse_marker_name, read_batch_file

FileGroup = tuple[str, str]


@dataclass(frozen=True)
class HeldGroup:
    """A file group a live write holds a marker in."""

    base: bool          # a base file (create/merge), not only log appends
    since_ms: int       # when its first marker there appeared (the marker file's mtime), epoch ms


@dataclass(frozen=True)
class LiveWrite:
    """A pending data write whose writer is alive, as its markers show it."""

    instant: str
    action: str
    last_sign_ms: int                       # its last heartbeat (or its start)
    groups: Mapping[FileGroup, HeldGroup]
    overwrite: bool = False                 # an overwrite: checked at its commit, by partition


@dataclass(frozen=True)
class OutsideConflict:
    """`loser` must stop: `winner` (older and live, or completed since the loser started) holds the
    same file groups."""

    loser: str
    winner: str
    file_groups: frozenset[FileGroup]
    winner_completed: str | None    # the winner's completion time, None while it is pending
    marker_at_ms: int               # when the later of the two conflicting markers appeared
    loser_writer: str | None = None     # who writes each (the registry's names), when the caller knows
    winner_writer: str | None = None

    def details(self, decided_by: str) -> dict[str, Any]:
        """The record `abort_loser` writes (and a ZooKeeper abort flag carries)."""
        named = {k: v for k, v in (("writer", self.loser_writer), ("other_writer", self.winner_writer)) if v}
        return {"reason": "conflict", "other": self.winner, "decided_by": decided_by,
                "file_groups": [list(g) for g in sorted(self.file_groups)],
                "marker_at": self.marker_at_ms, "other_completed": self.winner_completed, **named}

    def describe(self) -> str:
        groups = ", ".join(f"{f} in {p or '(unpartitioned)'}" for p, f in sorted(self.file_groups)[:3])
        more = f" and {len(self.file_groups) - 3} more" if len(self.file_groups) > 3 else ""
        if self.winner_completed:   # older or not, it committed since the loser started
            other = f"write {self.winner}, completed at {self.winner_completed} after it started,"
        else:
            other = f"the older write {self.winner} (still writing)"
        return f"write {self.loser} conflicts with {other} on {groups}{more}"


def held_groups(storage: Storage, instant_time: str) -> dict[FileGroup, HeldGroup]:
    """The file groups the instant's markers (direct and batched) name, with when each first appeared."""
    root = join(MARKERS_DIR, instant_time)
    held: dict[FileGroup, HeldGroup] = {}
    for f in storage.list_tree(root):
        rel = f.path[len(root) + 1:]
        names = read_batch_file(storage, f.path) if is_batch_file(rel) else [rel]
        at = int(f.mtime * 1000)
        for name in names:
            m = parse_marker_name(instant_time, name)
            if m is None:
                continue
            partition, _, file_name = m.data_path.rpartition("/")
            parsed = parse_data_file_name(file_name)
            if parsed is None:
                continue
            group = (partition, parsed.file_id)
            base = m.io_type != "append"
            old = held.get(group)
            if old is None:
                held[group] = HeldGroup(base, at)
            else:
                held[group] = HeldGroup(old.base or base, min(old.since_ms, at))
    return held


def live_writes(storage: Storage, timeline: Timeline, heartbeat: HeartbeatConfig,
                now: int | None = None) -> list[LiveWrite]:
    """Pending data writes whose writer is alive (not aborted, not claimed by a rollback, heartbeat
    fresh), oldest first, with the file groups their markers hold."""
    store = TimelineStore(storage)
    now = now_ms() if now is None else now
    claimed = claimed_by_rollbacks(store, timeline) \
        if any(i.action == "rollback" for i in timeline.pending) else set()
    found = []
    for inst in timeline.pending:
        t = inst.requested_time
        if inst.action not in CHECKED_ACTIONS or t in claimed or not is_pending_write(store, inst):
            continue
        sign = last_sign_of_life(storage, t)
        if now - sign > heartbeat.timeout_ms or is_aborted(storage, t):
            continue
        overwrite = inst.action == "replacecommit"  # is_pending_write kept overwrites only
        found.append(LiveWrite(t, inst.action, sign, held_groups(storage, t), overwrite))
    return sorted(found, key=lambda w: w.instant)


def find_outside_conflicts(storage: Storage, mode: ConcurrencyMode, heartbeat: HeartbeatConfig, *,
                           timeline: Timeline | None = None, now: int | None = None,
                           writes: list[LiveWrite] | None = None) -> list[OutsideConflict]:
    """One decision per loser (its oldest winner), losers in instant order. See the module docstring
    for the rules."""
    if mode == "single_writer":
        return []
    store = TimelineStore(storage)
    timeline = store.load() if timeline is None else timeline
    writes = live_writes(storage, timeline, heartbeat, now) if writes is None else writes
    only_bases = mode == "non_blocking"
    checked = [w for w in writes if not w.overwrite]
    decisions: list[OutsideConflict] = []
    lost: set[str] = set()
    for i, loser in enumerate(checked):
        mine = _groups(loser, only_bases)
        if not mine:
            continue
        decision = None
        for winner in checked[:i]:  # older live writes; one that lost above will never commit
            if winner.instant in lost:
                continue
            overlap = mine & _groups(winner, only_bases)
            if overlap:
                at = max(max(loser.groups[g].since_ms, winner.groups[g].since_ms) for g in overlap)
                decision = OutsideConflict(loser.instant, winner.instant, frozenset(overlap), None, at)
                break
        if decision is None:
            decision = _against_completed(store, timeline, loser, mine, only_bases)
        if decision is not None:
            decisions.append(decision)
            lost.add(loser.instant)
    return decisions


def _groups(write: LiveWrite, only_bases: bool) -> frozenset[FileGroup]:
    return frozenset(g for g, h in write.groups.items() if h.base or not only_bases)


def _against_completed(store: TimelineStore, timeline: Timeline, loser: LiveWrite, mine: frozenset[FileGroup],
                       only_bases: bool) -> OutsideConflict | None:
    ours = Instant(loser.instant, loser.action)  # type: ignore[arg-type]
    for other in completed_since(timeline, ours):
        meta = store.metadata(other)
        if meta.operation in SLICE_REWRITES or scope_of(meta) is not None:
            continue  # a clustering's slice takes later logs; overwrites are checked at commit
        theirs = {(s.partition, s.file_id) for s in meta.write_stats if s.kind == "base" or not only_bases}
        overlap = mine & theirs
        if overlap:
            at = max(loser.groups[g].since_ms for g in overlap)
            return OutsideConflict(loser.instant, other.requested_time, frozenset(overlap),
                                   other.completion_time, at)
    return None


def abort_loser(storage: Storage, lock: Lock, conflict: OutsideConflict, decided_by: str, *,
                now: int | None = None) -> bool:
    """Record the loser's proof of death (with the decision's details) under the table lock, if it is
    still pending; False when it completed or left the timeline first. Idempotent: a loser aborted
    already stays aborted with its first record (True)."""
    return abort_pending(storage, lock, conflict.loser, f"{decided_by}: {conflict.describe()}",
                         conflict.details(decided_by), now=now)


def pending_times(timeline: Timeline, actions: Iterable[str] = CHECKED_ACTIONS) -> set[str]:
    """The pending instants of the given actions (what an abort flag may still concern)."""
    wanted = frozenset(actions)
    return {i.requested_time for i in timeline.pending if i.action in wanted}
