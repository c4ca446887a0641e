"""Writes that completed but whose completed instant file is lost (`weir table check` / `repair`).

A pending write whose data files have no markers completed (concurrency/rollback.py says why): its
file `<T>_<C>.<action>` was deleted by hand or left out of a restore. Its body is rebuilt as a damaged
instant's is (rebuild.py), and its completion time C, which is lost with the file name, is chosen to
keep what readers saw:
- after T's newest data file was written (the file's modification time, + 1 ms), and after every
  compaction or clustering of T's file groups whose plan leaves T's files out and that was planned
  before any plan naming them (planned while T looked pending: T's log files then belong to the slice
  it starts, so they are read);
- before the first compaction or clustering whose plan names T's files (planned while T was
  completed: its rows are in what that service wrote, and are not read twice).
When those bounds cross there is no such time: restore the file from a backup, or give the write up.
Reads only; repair.py writes under the lock (`complete_lost`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from lakecore.concurrency import Lock, ensure_held
from lakecore.concurrency.liveness.heartbeat import delete_heartbeat, delete_writer_record
from lakecore.concurrency.rollback import claimed_by_rollbacks, completion_lost, is_pending_write
from lakecore.errors import CorruptMetadata
from lakecore.layout import parse_data_file_name
from lakecore.layout.listing import data_files
from lakecore.services.clustering_plan import ClusteringOperation, ClusteringPlan
from lakecore.services.compaction_plan import CompactionOperation, CompactionPlan
from lakecore.services.rebuild import Rebuild, group_of, instant_of, rebuild_instant
from lakecore.storage import FileInfo, Storage
from lakecore.timeline import (
    TIMELINE_DIR,
    Instant,
    State,
    Timeline,
    TimelineStore,
    format_ms,
    requested_scope,
    to_epoch_ms,
)
from lakecore.write.markers import list_markers


@dataclass(frozen=True)
class LostWrite:
    instant: Instant                 # pending on the timeline
    files: tuple[str, ...]           # its data files (no markers)
    rebuild: Rebuild                 # metadata None: cannot be written again (`rebuild.why`)
    present: Mapping[str, FileInfo] = field(default_factory=dict)   # its files' listing entries

    @property
    def path(self) -> str:
        inst = self.instant
        name = inst.inflight_file() if inst.state is State.INFLIGHT else inst.requested_file()
        return f"{TIMELINE_DIR}/{name}"

    @property
    def completion_time(self) -> str | None:
        return self.rebuild.instant.completion_time if self.rebuild.metadata is not None else None


def lost_writes(storage: Storage, timeline: Timeline) -> list[LostWrite]:
    """The pending writes of `timeline` that completed (their data files have no markers), each with
    its rebuild. Reads only; the timeline is loaded again after the markers are read, so a write that
    completed meanwhile is not taken for one."""
    store = TimelineStore(storage)
    candidates = [i for i in timeline.pending if is_pending_write(store, i)]
    if not candidates:
        return []
    claimed = claimed_by_rollbacks(store, timeline)
    files = data_files(storage)
    found = [(i, fs) for i in candidates if i.requested_time not in claimed
             and (fs := completion_lost(storage, i, files))]
    if not found:
        return []
    now = store.load()
    readable = Timeline(tuple(i for i in now.instants if i not in {d for d, _ in store.damaged(now)}),
                        now.archived)
    out = []
    for inst, fs in found:
        again = now.find(inst.requested_time)
        if again is None or again.is_completed:
            continue
        out.append(LostWrite(again, fs, _rebuild(storage, readable, again, files),
                             files.get(inst.requested_time, {})))
    return out


def _rebuild(storage: Storage, timeline: Timeline, inst: Instant,
             files: Mapping[str, Mapping[str, FileInfo]]) -> Rebuild:
    completion, why = completion_for(storage, timeline, inst, files.get(inst.requested_time, {}))
    if completion is None:
        return Rebuild(inst, None, why)
    done = Instant(inst.requested_time, inst.action, State.COMPLETED, completion)
    rb = rebuild_instant(storage, done, b"", files, timeline, timeline)
    if rb.metadata is None:
        return rb
    marks = dict(rb.metadata.extra.get("rebuilt") or {})
    marks["guessed"] = [*marks.get("guessed", []), "completion_time"]
    meta = replace(rb.metadata, extra={**rb.metadata.extra, "rebuilt": marks})
    return replace(rb, metadata=meta, notes=(*rb.notes, why))


def completion_for(storage: Storage, timeline: Timeline, inst: Instant, present: Mapping[str, FileInfo]
                   ) -> tuple[str | None, str]:
    """A completion time for the lost write `inst` (the module docstring says which), and how it was
    chosen or why there is none. Reads only."""
    t = inst.requested_time
    groups = {group_of(p) for p in present}
    services = _services_of(storage, timeline, groups, t)
    for w, built_on in _later_bases(storage, timeline, groups, t):
        if not built_on:   # made while it looked pending: that base, not its, is read in those groups
            return None, (f"write {w} wrote a new base file of its file group(s) without its rows (made "
                          "while it looked pending), so its rows there would not be read")
        services.append((w, True))   # built on its base: it completed before that write
    merged = min((s for s, named in services if named), default=None)
    # a service planned after the first that merged T's files left them out because they were in an
    # older slice already, not because T looked pending
    skipped = [s for s, named in services if not named and (merged is None or s < merged)]
    low = to_epoch_ms(max([t, *skipped])) + 1
    high = to_epoch_ms(merged) if merged is not None else None
    written = int(max(f.mtime for f in present.values()) * 1000) + 1 if present else low
    taken = {x for i in timeline.instants for x in (i.requested_time, i.completion_time) if x}
    c = _free(max(low, written), taken)
    how = "just after its newest data file was written"
    if high is not None and c >= high:
        c, how = _free(low, taken), f"just after {max(skipped)}" if skipped else "just after its start"
        if c >= high:
            after = f"{max(skipped)}, planned before it, left them out" if skipped else \
                "no free time is left between its start and it"
            return None, f"no completion time fits: {merged} merged its files, but {after}"
    why = f"completion time {format_ms(c)} chosen {how}"
    if merged is not None:
        why += f", before {merged}, which merged its files"
    if skipped:
        why += (f", after {', '.join(skipped)}, planned on its file groups while it looked pending: where a "
                "write those merged changed its keys after it, its values are read (an ordering field still "
                "decides)")
    return format_ms(c), why + " (the real one is lost)"


def _free(ms: int, taken: set[str]) -> int:
    """The first millisecond from `ms` on that no instant's time uses."""
    while format_ms(ms) in taken:
        ms += 1
    return ms


def _later_bases(storage: Storage, timeline: Timeline, groups: set[tuple[str, str]], t: str
                 ) -> list[tuple[str, bool]]:
    """The completed data writes after T that wrote base files of T's file groups, each with whether
    every such base merged T's (its `base_instant`)."""
    store = TimelineStore(storage)
    out = []
    for inst in timeline.completed:
        if inst.requested_time <= t or inst.action not in ("commit", "deltacommit", "replacecommit"):
            continue
        try:
            if inst.action == "replacecommit" and requested_scope(store.read_plan(inst)) is None:
                continue   # a clustering: _services_of
            stats = store.metadata(inst).write_stats
        except (FileNotFoundError, CorruptMetadata):
            continue
        bases = [s for s in stats if s.kind == "base" and (s.partition, s.file_id) in groups]
        if bases:
            out.append((inst.requested_time, all(s.base_instant == t for s in bases)))
    return out


def pending_bases(storage: Storage, timeline: Timeline, groups: set[tuple[str, str]], t: str) -> list[str]:
    """Pending writes other than T whose markers name base files of T's file groups."""
    store = TimelineStore(storage)
    out = []
    for inst in timeline.pending:
        if inst.requested_time == t or not is_pending_write(store, inst):
            continue
        for m in list_markers(storage, inst.requested_time):
            parsed = parse_data_file_name(m.data_path.rsplit("/", 1)[-1])
            if parsed is not None and parsed.kind == "base" and group_of(m.data_path) in groups:
                out.append(inst.requested_time)
                break
    return out


def _services_of(storage: Storage, timeline: Timeline, groups: set[tuple[str, str]], t: str
                 ) -> list[tuple[str, bool]]:
    """The compactions and clusterings (pending or completed) planned on T's file groups, each with
    whether its plan names a file of T."""
    store = TimelineStore(storage)
    out = []
    for inst in timeline.instants:
        if inst.action not in ("compaction", "replacecommit") or inst.requested_time == t:
            continue
        try:
            body = store.read_plan(inst)
            ops: Sequence[CompactionOperation | ClusteringOperation]
            if inst.action == "compaction":
                ops = CompactionPlan.loads(body).operations
            elif body and requested_scope(body) is None:
                ops = ClusteringPlan.loads(body).operations
            else:
                continue
        except (FileNotFoundError, CorruptMetadata):
            continue
        mine = [op for op in ops if (op.partition, op.file_id) in groups]
        if mine:
            named = any(instant_of(p) == t for op in mine for p in op.paths())
            out.append((inst.requested_time, named))
    return out


def complete_lost(storage: Storage, lock: Lock, lost: LostWrite) -> Instant | str:
    """Write the lost write's completed instant file again, under the lock, after checking it is
    still pending, unclaimed, without markers and not given up, that no pending write is making a
    base file of its file groups, and that its completion time still fits. Else why not (nothing
    written)."""
    meta, completion = lost.rebuild.metadata, lost.completion_time
    assert meta is not None and completion is not None
    store = TimelineStore(storage)
    t = lost.instant.requested_time
    groups = {group_of(p) for p in lost.files}
    with lock:
        timeline = store.load()
        now = timeline.find(t)
        if now is None or now.is_completed or t in claimed_by_rollbacks(store, timeline) \
                or not completion_lost(storage, now):
            return ("left as it is: it is no longer pending without markers (restored or rolled back "
                    "meanwhile)")
        busy = pending_bases(storage, timeline, groups, t)
        if busy:
            return (f"not now: pending write(s) {', '.join(busy)} write base files of its file groups; run "
                    "the repair again once they have finished")
        again, why = completion_for(storage, timeline, now, lost.present)
        if again != completion:
            return f"not now: the timeline changed meanwhile ({why}); run the repair again"
        ensure_held(lock, f"completing the lost write {t} again")
        inflight = store.transition_inflight(now) if now.state is State.REQUESTED else now
        done = store.complete(inflight, completion, meta)
    delete_heartbeat(storage, t)  # what its writer would have removed after committing
    delete_writer_record(storage, t)
    return done
