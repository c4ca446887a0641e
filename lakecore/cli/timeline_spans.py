"""What the timeline picture draws: every instant of a table as a `Span` (requested -> completion, on a
lane), read from the table. The I/O half of `weir table timeline --html`; timeline_html draws.

Owns the reading of everything a table records about its past and present writes: the active and
archived timeline, commit metadata (the writer a commit names in its extra: `writer`, the operator's
`<namespace>/<name>`, else the streaming writer's `weir.writer`), the proofs of death
(`.weir/aborted/<T>`, with a supervisor's conflict details), rollback and undo instants (which write
they took back, and so the bars of writes no longer on the timeline) and the heartbeats of pending
writes. Must not change the table: it only lists and reads.

Tables with thousands of instants: the newest `max_spans` completed instants (and every pending one)
become spans with their metadata; older ones are only counted (requested time and action, read as
Arrow columns, never their metadata) into `Counted` buckets the picture shows as density strips.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.concurrency.liveness.heartbeat import ABORTED_DIR, read_aborted, read_last_beat
from lakecore.concurrency.liveness.writers import StorageWriterRegistry
from lakecore.concurrency.rollback import claimed_by_rollbacks, is_pending_write
from lakecore.errors import CorruptMetadata
from lakecore.table import Table
from lakecore.timeline import (
    CommitMetadata,
    Instant,
    RowCounts,
    State,
    Timeline,
    TimelineStore,
    now_ms,
    parse_file_name,
    to_epoch_ms,
)
from lakecore.timeline.metadata import counted, writer_of

Outcome = Literal["completed", "pending", "aborted", "rolled_back"]
WRITE_LANE_UNNAMED = "(unnamed writer)"        # a completed write whose commit names no writer
# pending or taken back, and named neither by the registry on storage nor by its proof of death
WRITE_LANE_UNKNOWN = "(writer not recorded)"
SERVICE_LANES = ("compaction", "clustering", "clean", "rollback", "savepoint", "restore")
MAX_SPANS = 2000


@dataclass(frozen=True)
class Span:
    """One instant as drawn: a bar from `start_ms` to `end_ms` (None: still open, drawn to now)."""

    instant: str                 # requested time
    action: str
    state: str                   # requested | inflight | completed | rolled back | undone
    outcome: Outcome
    lane: str
    service: bool
    start_ms: int
    end_ms: int | None
    completion: str | None = None
    writer: str | None = None
    operation: str | None = None
    counts: RowCounts | None = None   # rows written and delete keys (completed writes)
    files: int | None = None
    file_groups: int | None = None
    reason: str | None = None    # why it was aborted or taken back, or why a pending one looks dead
    conflict: bool = False       # lost a conflict (aborted by a supervisor or an early detection)
    lost_to: str | None = None   # the conflict's winner instant
    abort_ms: int | None = None  # when its proof of death was recorded
    note: str | None = None      # what a service instant did (e.g. "rolled back 2026...")
    archived: bool = False


@dataclass(frozen=True)
class Counted:
    """Older instants drawn as counts: `count` instants of `action` requested in [start_ms, end_ms)."""

    action: str
    start_ms: int
    end_ms: int
    count: int


@dataclass(frozen=True)
class TimelineFacts:
    name: str
    uri: str
    now_ms: int
    spans: tuple[Span, ...]
    counted: tuple[Counted, ...] = ()
    total: int = 0                       # instants on the timeline, archived ones included
    archived: int = 0                    # of which archived
    archived_boundary_ms: int | None = None
    archival: str | None = None          # what archival did, said on the archival lane
    notes: tuple[str, ...] = field(default_factory=tuple)


def read_facts(table: Table, *, now: int | None = None, max_spans: int = MAX_SPANS,
               buckets: int = 120) -> TimelineFacts:
    """Everything the picture of `table`'s timeline shows, read now."""
    now = now_ms() if now is None else now
    storage = table.storage
    store = TimelineStore(storage)
    timeline = table.timeline()
    index = _index(store, timeline)
    completed = index.filter(pc.invert(index.column("pending")))
    drawn_from = ""
    if completed.num_rows > max_spans:
        order = pc.sort_indices(completed, sort_keys=[("requested_time", "descending")])
        drawn_from = completed.column("requested_time").take(order)[max_spans - 1].as_py()
    older = completed.filter(pc.less(completed.column("requested_time"), drawn_from)) if drawn_from \
        else completed.slice(0, 0)

    instants: list[tuple[Instant, bool]] = [(i, False) for i in timeline.instants
                                            if not i.is_completed or i.requested_time >= drawn_from]
    if timeline.archived.count:
        instants = _archived(store, timeline, completed, drawn_from) + instants
    metas: dict[str, CommitMetadata] = {}
    broken: list[str] = []
    for inst, _ in instants:
        if inst.is_completed:
            try:
                metas[inst.requested_time] = store.metadata(inst)
            except CorruptMetadata:
                broken.append(inst.requested_time)
    records = _abort_records(table, {i.requested_time for i, _ in instants if not i.is_completed}, metas)
    claimed = claimed_by_rollbacks(store, timeline) if any(
        i.action == "rollback" and not i.is_completed for i in timeline.instants) else set()
    dead_by_clean = {str(t) for m in metas.values() if m.operation == "clean"
                     for t in m.extra.get("rolled_back", ()) or ()}

    registered = _registered(table) if any(not i.is_completed for i, _ in instants) else {}
    spans: list[Span] = []
    lanes: dict[str, str] = {}
    for inst, archived in instants:
        span = _span(store, table, inst, metas.get(inst.requested_time), archived, now)
        if span.lane == WRITE_LANE_UNKNOWN and registered.get(span.instant):
            span = replace(span, lane=registered[span.instant])
        spans.append(span)
        lanes[span.instant] = span.lane
    spans += _taken_back(spans, metas, lanes, {i.requested_time for i, _ in instants})
    spans = [_with_reason(s, records.get(s.instant), lanes, claimed, dead_by_clean) for s in spans]

    notes = []
    if older.num_rows:
        notes.append(f"{older.num_rows} older completed instants (before {_iso_of(drawn_from)}) are drawn as "
                     f"counts per time slice, not one bar each: the page shows the newest {max_spans} "
                     "instants and every pending one individually")
    if broken:
        notes.append(f"{len(broken)} instant file(s) could not be read ({', '.join(broken[:5])}): "
                     "`weir table check` says more")
    boundary = timeline.archived.boundary
    manifest = timeline.archived.manifest
    archival = (f"archival moved {manifest.count} completed instants (completed up to {boundary}) into the "
                f"archived timeline: {len(manifest.files)} history file(s), manifest version "
                f"{manifest.version}; they are drawn faded") if boundary else None
    return TimelineFacts(table.config.name, table.uri, now, tuple(sorted(spans, key=lambda s: s.start_ms)),
                         _count(older, buckets), timeline.total, timeline.archived.count,
                         to_epoch_ms(boundary) if boundary else None, archival, tuple(notes))


# -- reading ----------------------------------------------------------------------------------------


def _index(store: TimelineStore, timeline: Timeline) -> pa.Table:
    """requested_time, completion_time, action, pending of every instant (archived ones as Arrow columns)."""
    listed = timeline.instants
    active = pa.table({"requested_time": pa.array([i.requested_time for i in listed], pa.string()),
                       "completion_time": pa.array([i.completion_time for i in listed], pa.string()),
                       "action": pa.array([i.action for i in listed], pa.string()),
                       "pending": pa.array([not i.is_completed for i in listed], pa.bool_())})
    if not timeline.archived.count:
        return active
    rows = store.history.rows(timeline.archived.manifest, ["requested_time", "completion_time", "action"])
    rows = rows.append_column("pending", pa.array([False] * rows.num_rows, pa.bool_()))
    return pa.concat_tables([rows.cast(active.schema), active])


def _archived(store: TimelineStore, timeline: Timeline, completed: pa.Table, drawn_from: str
              ) -> list[tuple[Instant, bool]]:
    """The archived instants drawn one by one (requested at or after `drawn_from`), with their metadata;
    only the history files that can hold them are read."""
    manifest = timeline.archived.manifest
    after = ""
    if drawn_from:
        comp = completed.column("completion_time")
        first = pc.min(comp.filter(pc.greater_equal(completed.column("requested_time"), drawn_from))).as_py()
        before = comp.filter(pc.less(comp, first)) if first else comp.slice(0, 0)
        after = (pc.max(before).as_py() or "") if len(before) else ""
        if manifest.boundary <= after:
            return []
    found = store.archived_instants(manifest, after)  # caches their metadata for store.metadata
    return [(i, True) for i in found if i.requested_time >= drawn_from]


def _registered(table: Table) -> dict[str, str]:
    """instant -> writer name of the writes registered on storage (tables on the storage lock; those on
    ZooKeeper register there, which this report does not reach)."""
    try:
        infos = StorageWriterRegistry(table.storage).live_writers(table.uri)
    except Exception:  # a report: an unreadable registry only leaves lanes unnamed
        return {}
    return {t: str(info["writer"]) for t, info in infos.items() if info.get("writer")}


def _abort_records(table: Table, pending: set[str], metas: Mapping[str, CommitMetadata]
                   ) -> dict[str, dict[str, Any]]:
    """The proofs of death of pending instants and of writes rollbacks took back."""
    wanted = set(pending)
    for meta in metas.values():
        if meta.operation == "rollback" and meta.extra.get("rolled_back"):
            wanted.add(str(meta.extra["rolled_back"]))
        wanted.update(str(t) for t in meta.extra.get("rolled_back_pending", ()) or ())
    names = {info.path.rsplit("/", 1)[-1] for info in table.storage.list_dir(ABORTED_DIR)}
    out = {}
    for t in sorted(wanted & names):
        record = read_aborted(table.storage, t)
        if record is not None:
            out[t] = record
    return out


def _span(store: TimelineStore, table: Table, inst: Instant, meta: CommitMetadata | None, archived: bool,
          now: int) -> Span:
    start = to_epoch_ms(inst.requested_time)
    state = inst.state.name.lower()
    if inst.is_completed:
        end: int | None = to_epoch_ms(inst.completion_time or inst.requested_time)
        service, lane = _lane_of_completed(inst, meta)
        writer = writer_of(meta.extra) if meta else None
        stats = meta.write_stats if meta else ()
        return Span(inst.requested_time, inst.action, state, "completed", lane, service, start, end,
                    inst.completion_time, writer, meta.operation if meta else None,
                    meta.counts if meta else None, len(stats) if meta else None,
                    len(meta.file_groups) if meta else None, note=_note(inst, meta), archived=archived)
    write = is_pending_write(store, inst)
    if write:
        reason = None
        beat = read_last_beat(table.storage, inst.requested_time)
        last = max(beat or start, start)
        timeout = table.options.heartbeat.timeout_ms
        if now - last > timeout:
            reason = (f"its writer looks dead: no heartbeat for {(now - last) / 1000:.0f} s (timeout "
                      f"{timeout / 1000:.0f} s); the next writer or clean rolls it back")
        return Span(inst.requested_time, inst.action, state, "pending", WRITE_LANE_UNKNOWN, False, start,
                    None, reason=reason)
    lane = "clustering" if inst.action == "replacecommit" else inst.action
    return Span(inst.requested_time, inst.action, state, "pending", lane, True, start, None,
                note=_pending_note(store, inst))


def _lane_of_completed(inst: Instant, meta: CommitMetadata | None) -> tuple[bool, str]:
    if inst.action in ("commit", "deltacommit") or (
            inst.action == "replacecommit" and meta is not None and meta.operation != "clustering"):
        name = writer_of(meta.extra) if meta else None
        return False, name or WRITE_LANE_UNNAMED
    if inst.action == "replacecommit":
        return True, "clustering"
    return True, inst.action


def _note(inst: Instant, meta: CommitMetadata | None) -> str | None:
    if meta is None:
        return None
    extra = meta.extra
    if inst.action in ("rollback", "restore"):
        if extra.get("rolled_back"):
            return f"rolled back the pending {extra.get('action', 'write')} {extra['rolled_back']}"
        undone = [p.requested_time for n in extra.get("undone", ()) or () if (p := parse_file_name(str(n)))]
        what = f"undid {_few(undone)}" if undone else "undid nothing"
        if extra.get("restored_to"):
            what += f" (restore to savepoint {extra.get('savepoint')}, as of {extra['restored_to']})"
        return what
    if inst.action == "clean":
        dead = list(extra.get("rolled_back", ()) or ())
        text = f"deleted {counted(len(extra.get('deleted', ()) or ()), 'file')}"
        return text + (f"; rolled back dead writes {_few([str(d) for d in dead])}" if dead else "")
    if inst.action == "savepoint":
        if extra.get("deleted_savepoint"):
            return f"deleted savepoint {extra['deleted_savepoint']}"
        return f"savepoint of {extra.get('savepointed')}" + (f": {extra['comment']}" if extra.get("comment")
                                                              else "")
    if inst.action == "compaction":
        return f"compacted {counted(len(meta.file_groups), 'file group')} ({extra.get('strategy', '')})"
    if meta.operation == "clustering":
        return f"clustered {counted(len(meta.file_groups), 'file group')}"
    return None


def _pending_note(store: TimelineStore, inst: Instant) -> str | None:
    if inst.action != "rollback" or inst.state is State.COMPLETED:
        return None
    try:
        plan = json.loads(store.read_plan(inst) or b"{}")
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        return None
    target = plan.get("rolled_back") if isinstance(plan, dict) else None
    return f"rolling back {target}" if target else None


def _taken_back(spans: Sequence[Span], metas: Mapping[str, CommitMetadata], lanes: dict[str, str],
                present: set[str]) -> list[Span]:
    """Writes no longer on the timeline because a rollback or restore took them back: the rollback's
    metadata names them (pending ones by requested time, completed ones by their instant file)."""
    out = []
    for s in spans:
        meta = metas.get(s.instant)
        if s.action not in ("rollback", "restore") or meta is None or s.end_ms is None:
            continue
        extra = meta.extra
        by = f"{s.action} {s.instant}"
        targets: list[tuple[Instant, str]] = []
        if extra.get("rolled_back"):
            action = str(extra.get("action") or "deltacommit")
            targets.append((Instant(str(extra["rolled_back"]), action, State.INFLIGHT), "rolled back"))  # type: ignore[arg-type]
        for t in extra.get("rolled_back_pending", ()) or ():
            targets.append((Instant(str(t), "deltacommit", State.INFLIGHT), "rolled back"))
        for name in extra.get("undone", ()) or ():
            parsed = parse_file_name(str(name))
            if parsed is not None:
                targets.append((parsed, "undone"))
        for target, state in targets:
            t = target.requested_time
            if t in present or len(t) != 17 or not t.isdigit():
                continue
            present.add(t)
            end = to_epoch_ms(target.completion_time) if target.completion_time else s.end_ms
            service = target.action == "compaction"
            lane = "compaction" if service else WRITE_LANE_UNKNOWN
            out.append(Span(t, target.action, state, "rolled_back", lane, service, to_epoch_ms(t),
                            max(end, to_epoch_ms(t)), target.completion_time,
                            reason=f"{state} by {by}", archived=s.archived))
            lanes[t] = lane
    return out


def _with_reason(s: Span, record: Mapping[str, Any] | None, lanes: Mapping[str, str], claimed: set[str],
                 dead_by_clean: set[str]) -> Span:
    """Why a write was aborted or taken back, from its proof of death (and the cleans' records)."""
    if s.outcome == "completed" or (s.service and s.outcome != "rolled_back"):
        return s
    reasons = []
    conflict = False
    at = None
    other = None
    if record is not None:
        at_value = record.get("at")
        at = at_value if isinstance(at_value, int) else None
        if record.get("reason") == "conflict":
            conflict = True
            other = str(record.get("other") or "?")
            writer = lanes.get(other) or (str(record["other_writer"]) if record.get("other_writer") else None)
            who = f" ({writer})" if writer and not writer.startswith("(") else ""
            groups = [f"{g[0]}/{g[1]}" if g[0] else str(g[1]) for g in record.get("file_groups") or ()
                      if isinstance(g, list) and len(g) == 2]
            on = f" on file group(s) {_few(groups, 3)}" if groups else ""
            decided = record.get("decided_by") or record.get("by")
            reasons.append(f"conflict: lost to {other}{who}{on}; decided by {decided}")
        else:
            by = str(record.get("by") or "unknown")
            if by.startswith("aborted:"):
                reasons.append(f"its writer aborted ({by.removeprefix('aborted:').strip()})")
            elif record.get("reason"):
                reasons.append(f"{record['reason']} (by {by})")
            elif by != "rollback" and not by.startswith("rollback "):  # a rollback's own claim: said below
                reasons.append(f"marked dead by {by}")
    if s.instant in dead_by_clean:
        reasons.append("its writer was dead (heartbeat expired)")
    if s.instant in claimed:
        reasons.append("a pending rollback is taking it back")
    if s.reason:
        reasons.append(s.reason)
    outcome: Outcome = s.outcome
    if s.outcome == "pending" and (record is not None or s.instant in claimed):
        outcome = "aborted"
    if not reasons and s.outcome == "rolled_back":
        reasons.append("rolled back (no reason recorded)")
    named = str(record["writer"]) if record is not None and record.get("writer") else None
    lane = named if named and s.lane == WRITE_LANE_UNKNOWN else s.lane   # the proof of death names it
    return replace(s, outcome=outcome, conflict=conflict, lost_to=other, abort_ms=at, lane=lane,
                   reason="; ".join(reasons) or None)


def _count(older: pa.Table, buckets: int) -> tuple[Counted, ...]:
    """Older instants as counts per action and time slice (vectorized)."""
    if not older.num_rows:
        return ()
    req = older.column("requested_time")
    seconds = pc.strptime(pc.utf8_slice_codeunits(req, 0, 14), format="%Y%m%d%H%M%S", unit="ms")
    ms = pc.add(pc.cast(seconds, pa.int64()), pc.cast(pc.utf8_slice_codeunits(req, 14, 17), pa.int64()))
    lo, hi = pc.min(ms).as_py(), pc.max(ms).as_py() + 1
    width = max(1, -(-(hi - lo) // buckets))
    slot = pc.divide(pc.subtract(ms, lo), width)
    grouped = pa.table({"action": older.column("action"), "slot": slot}).group_by(["action", "slot"]) \
        .aggregate([("slot", "count")])
    return tuple(sorted(
        (Counted(a, lo + s * width, lo + (s + 1) * width, n) for a, s, n in
         zip(grouped.column("action").to_pylist(), grouped.column("slot").to_pylist(),
             grouped.column("slot_count").to_pylist(), strict=True)),
        key=lambda c: (c.action, c.start_ms)))


def _few(items: Sequence[str], n: int = 5) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")


def _iso_of(instant_time: str) -> str:
    ms = to_epoch_ms(instant_time)
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
