"""Archival: move the oldest completed instants out of the active timeline into the history.

    claim the archival run (concurrency/liveness/runs.py, key `archival`: ServiceRunning while another
    process archives) -> load timeline -> finish a crashed archival's deletions -> plan (pure) ->
    write a level-0 history
    file with the instants' metadata and plans -> new live files (old live files + the archived
    instants' files - files archived cleans deleted) -> merge full levels ->
    lock -> still our claim? reload, re-plan: same history version and still due? (else unlock,
    delete what was
    written, done) -> manifest -> pointer (the commit point) -> delete the instants' active files
    (requested, inflight, then the completed file last) -> delete history versions older than the
    kept ones (history_store.KEPT_VERSIONS) -> unlock

What is archived is a prefix of the completed instants in completion order, and it stops early:
- at the oldest pending instant's requested time (OCC checks instants completed after a pending
  write began: they stay active);
- at a live savepoint, its savepointed instant included (savepoints and restores work on the active
  timeline);
- at the earliest instant the newest clean retained (the clean policy counts retained commits on the
  active timeline).
`min_instants` completed instants always stay active; archival runs when more than `max_instants`
are. Time travel, incremental reads and completion-time lookups keep working across the archived
range (TimelineStore.as_of / archived_instants read the history).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.concurrency import Lock, ensure_held
from lakecore.concurrency.liveness.heartbeat import DEFAULT_HEARTBEAT, HeartbeatConfig
from lakecore.concurrency.liveness.runs import ARCHIVAL, ServiceRun
from lakecore.errors import HistoryMoved, InvalidTableConfig, StorageError
from lakecore.services.savepoint import savepoints
from lakecore.storage import Storage
from lakecore.timeline import WRITE_ACTIONS, CommitMetadata, Instant, Timeline, TimelineStore, parse_file_name
from lakecore.timeline.checkpoint import with_checkpoints
from lakecore.timeline.history import (
    HISTORY_DIR,
    LIVE_SCHEMA,
    Archived,
    HistoryFile,
    Manifest,
    deleted_of,
    files_of,
    history_rows,
    latest_slices,
)
from lakecore.timeline.history_store import TIMELINE_DIR, HistoryStore

Clock = Callable[[], int]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArchivalPolicy:
    """Keep between `min_instants` and `max_instants` completed instants active; merge `fanout`
    history files of a level into one of the next level."""

    min_instants: int = 20
    max_instants: int = 30
    fanout: int = 10

    def __post_init__(self) -> None:
        for name in ("min_instants", "max_instants", "fanout"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InvalidTableConfig(f"archival {name} must be an integer >= 1, got {v!r}")
        if self.min_instants >= self.max_instants:
            raise InvalidTableConfig(f"archival min_instants ({self.min_instants}) must be below "
                                     f"max_instants ({self.max_instants})")
        if self.fanout < 2:
            raise InvalidTableConfig(f"archival fanout must be >= 2, got {self.fanout}")

    def to_json(self) -> dict[str, Any]:
        return {"min_instants": self.min_instants, "max_instants": self.max_instants, "fanout": self.fanout}


@dataclass(frozen=True)
class ArchivalPlan:
    instants: tuple[Instant, ...]   # to archive, in completion order
    stopped_by: str | None          # why fewer than the policy allows (None: the policy's limit)

    def to_json(self) -> dict[str, Any]:
        return {"instants": [str(i) for i in self.instants], "count": len(self.instants),
                "first": self.instants[0].requested_time if self.instants else None,
                "last": self.instants[-1].requested_time if self.instants else None,
                "stopped_by": self.stopped_by}


@dataclass(frozen=True)
class ArchivalResult:
    archived: int                   # instants moved this run
    version: int                    # the new manifest version
    boundary: str                   # newest archived completion time
    levels: dict[int, int]          # history files per level after merging
    live_files: int
    stopped_by: str | None = None   # why fewer than the policy allows (a savepoint, a pending instant, ...)

    def to_json(self) -> dict[str, Any]:
        return {"archived": self.archived, "version": self.version, "boundary": self.boundary,
                "levels": {str(k): v for k, v in self.levels.items()}, "live_files": self.live_files,
                "stopped_by": self.stopped_by}


def plan_archival(timeline: Timeline, metadata: Callable[[Instant], CommitMetadata],
                  policy: ArchivalPolicy) -> ArchivalPlan:
    """Which completed instants to archive now. Pure."""
    done = timeline.completed
    if len(done) <= policy.max_instants:
        return ArchivalPlan((), None)
    pending = min((i.requested_time for i in timeline.pending), default=None)
    pinned: set[str] = set()
    for s in savepoints(timeline, metadata):
        pinned |= {s.instant_time, s.savepointed}
    cleans = [i for i in done if i.action == "clean"]
    retained = metadata(cleans[-1]).extra.get("earliest_retained") if cleans else None
    out: list[Instant] = []
    stopped: str | None = None
    for i in done[:len(done) - policy.min_instants]:
        completion = i.completion_time or ""
        if pending is not None and completion >= pending:
            stopped = f"pending instant {pending}"
        elif i.requested_time in pinned:
            stopped = f"savepoint on {i.requested_time}"
        elif retained and completion >= str(retained):
            stopped = f"clean retention from {retained}"
        if stopped:
            break
        out.append(i)
    return ArchivalPlan(tuple(out), stopped)


def run_archival(storage: Storage, lock: Lock, policy: ArchivalPolicy | None = None, *,
                 dry_run: bool = False, heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT
                 ) -> ArchivalPlan | ArchivalResult | None:
    """Archive per the policy. Returns the plan with `dry_run`, the result, or None if nothing was due
    or another archival, savepoint or undo changed what was due meanwhile (a crashed archival's
    leftovers are cleaned up either way).

    Only the commit holds the table lock: the history files are written before it, from a plain load,
    so writers committing beside an archival wait for a few small writes, not for Parquet files
    (multi-writer tables archive often and every writer waits on the same lock). Under the lock the
    archival re-plans from a fresh load and commits only if the history version is the one it
    started from and what it wrote is still a prefix of what is due; otherwise it deletes its files.
    One archival runs at a time per table: ServiceRunning while another live process archives."""
    policy = policy or ArchivalPolicy()
    store = TimelineStore(storage)
    if dry_run:
        return plan_archival(store.load(), store.metadata, policy)
    ServiceRun.ensure_free(storage, ARCHIVAL, "archival", heartbeat)  # busy: no wait on the lock
    with lock:
        run = ServiceRun.claim(storage, lock, ARCHIVAL, "archival", heartbeat)
    with run:
        return _run_claimed(storage, store, lock, policy, run)


def _run_claimed(storage: Storage, store: TimelineStore, lock: Lock, policy: ArchivalPolicy,
                 run: ServiceRun) -> ArchivalResult | None:
    history = HistoryStore(storage)
    timeline = store.load()
    plan = plan_archival(timeline, store.metadata, policy)
    _finish_deletions(storage, timeline.archived.boundary)
    if not plan.instants:
        return None
    previous = timeline.archived.manifest
    try:
        manifest, live = _archive(store, history, timeline, plan.instants, policy)
    except (FileNotFoundError, HistoryMoved):
        return None  # an undo removed an instant being archived, or another archival merged its files
    with lock:
        fresh = store.load()
        due = plan_archival(fresh, store.metadata, policy).instants
        current = run.owns() and fresh.archived.manifest.version == previous.version and \
            due[:len(plan.instants)] == plan.instants
        if current:
            ensure_held(lock, "committing an archival")
            history.commit(manifest)
    if not current:
        _discard(history, manifest, previous)
        return None
    # after the lock (writers wait on it): loads ignore the active files of archived instants, readers
    # meeting a collected history file reload, and a crash here is finished by the next archival
    _finish_deletions(storage, manifest.boundary)
    history.collect_garbage(manifest, previous.version)
    levels: dict[int, int] = {}
    for f in manifest.files:
        levels[f.level] = levels.get(f.level, 0) + 1
    return ArchivalResult(len(plan.instants), manifest.version, manifest.boundary,
                          dict(sorted(levels.items())), latest_slices(live).num_rows, plan.stopped_by)


def _discard(history: HistoryStore, written: Manifest, previous: Manifest) -> None:
    """Delete the files an archival wrote but did not commit (best effort: the next archival's
    garbage collection removes whatever is left)."""
    kept = {f.name for f in previous.files}
    ours = [f.name for f in written.files if f.name not in kept]
    for name in [*ours, written.live] if written.live else ours:
        try:
            history.storage.delete(f"{HISTORY_DIR}/{name}")
        except (OSError, StorageError) as exc:
            log.warning("could not delete %s, written by an archival that did not commit (%s); the next "
                        "archival's garbage collection removes it", name, exc)


def _archive(store: TimelineStore, history: HistoryStore, timeline: Timeline,
             instants: tuple[Instant, ...], policy: ArchivalPolicy) -> tuple[Manifest, pa.Table]:
    """The new version's manifest (written, not yet committed) and its live files."""
    entries = [(i, store.metadata(i), _plan_body(store, i)) for i in instants]
    previous = timeline.archived.manifest
    rows = history_rows(entries)
    version = history.next_version()
    added = history.write_rows(0, _checkpointed(history, previous.files, rows))
    live = _live_after(timeline.archived, rows)
    schema = previous.schema
    for i, meta, _ in entries:
        if i.action in WRITE_ACTIONS and meta.schema:
            schema = meta.schema
    files = _merge_levels(history, (*previous.files, added), policy.fanout)
    return Manifest(version, files, history.write_live(version, live), schema), live


def _plan_body(store: TimelineStore, instant: Instant) -> bytes:
    try:
        return store.read_plan(instant)
    except FileNotFoundError:
        return b""


def _live_after(archived: Archived, rows: pa.Table) -> pa.Table:
    """Live files after archiving `rows`: the previous live files and the rows' files, minus what
    the rows' cleans deleted (views at or after the new boundary never need those)."""
    live = pa.concat_tables([archived.live_table(), files_of(rows)])
    gone = deleted_of(rows)
    if len(gone) and live.num_rows:
        paths = pc.if_else(pc.equal(live.column("partition"), ""), live.column("file"),
                           pc.binary_join_element_wise(live.column("partition"), live.column("file"), "/"))
        live = live.filter(pc.invert(pc.is_in(paths, value_set=gone)))
    return live


def _merge_levels(history: HistoryStore, files: tuple[HistoryFile, ...], fanout: int
                  ) -> tuple[HistoryFile, ...]:
    """Merge any level holding `fanout` files into one file of the next level (repeatedly)."""
    current = list(files)
    level = 0
    while True:
        at = [f for f in current if f.level == level]
        if not at and not any(f.level > level for f in current):
            break
        if len(at) >= fanout:
            rows = pa.concat_tables([history.rows(Manifest(files=(f,)), _ALL_COLUMNS) for f in at])
            first = min(f.min_completion for f in at)
            older = tuple(f for f in current if f.max_completion < first)
            merged = history.write_rows(level + 1, _checkpointed(history, older, rows))
            current = [f for f in current if f not in at] + [merged]
        level += 1
    return tuple(sorted(current, key=lambda f: (f.level, f.min_completion)))


def _checkpointed(history: HistoryStore, older: tuple[HistoryFile, ...], rows: pa.Table) -> pa.Table:
    """The rows with their checkpoints, folded from the latest slices of the `older` history files
    (those completed before the rows: from their newest checkpoint, read once)."""
    before = Manifest(files=older)
    return with_checkpoints(history.slices_as_of(before, before.boundary) if older else
                            LIVE_SCHEMA.empty_table(), rows.sort_by("completion_time"))


_ALL_COLUMNS = ["requested_time", "completion_time", "action", "metadata", "plan", "files", "deleted"]


def _finish_deletions(storage: Storage, boundary: str) -> None:
    """Delete active timeline files of archived instants (requested and inflight before completed)."""
    if not boundary:
        return
    by_time: dict[str, list[Instant]] = {}
    for name in storage.list_names(TIMELINE_DIR):
        inst = parse_file_name(name)
        if inst is not None:
            by_time.setdefault(inst.requested_time, []).append(inst)
    doomed: list[tuple[int, str]] = []
    for t, states in by_time.items():
        done = next((i for i in states if i.is_completed), None)
        archived = (done.completion_time or "") <= boundary if done else t <= boundary
        if archived:
            doomed += [(int(i.is_completed), i.file_name) for i in states]
    for _, name in sorted(doomed):  # the completed file last: a crash never leaves a lone "pending" one
        storage.delete(f"{TIMELINE_DIR}/{name}")
