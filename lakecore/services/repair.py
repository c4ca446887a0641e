"""Checking and repairing a table's metadata (`weir table check`, `weir table repair`).

Owns what counts as damage (`check_table`: read-only, one Problem per finding) and how each kind is
repaired (`run_repair`: dry run by default; with dry_run=False under the table lock). A repair never
deletes metadata: a damaged file is moved into `.weir/quarantine/`.

    table.json missing or unreadable   -> recreate it from the newest write's recorded configuration
                                          (CommitMetadata.table) and the newest recorded schema
    a completed instant does not parse -> quarantine it; a write (commit/deltacommit/overwrite) is then rolled
                                          back (its rows are lost unless the file is restored from a
                                          backup); a table service's instant is pending again
    the newest history manifest is     -> fall back to the newest kept version that parses
      missing or does not parse           (history_store.KEPT_VERSIONS) and reactivate the instants
                                          archived since from the history files the newer versions
                                          wrote; quarantine the newer manifests and pointers
    a pending table service's plan     -> quarantine it; a pending compaction or clustering is then
      does not parse                      rolled back (its files deleted through its markers), a
                                          pending clean, restore or rollback dropped: run it again
    a history file does not parse,     -> reported only: restore it from a backup
      a data file the latest view needs
      is missing
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.concurrency import Lock, ensure_held, rollback_write
from lakecore.concurrency.lock_choice import lock_for_spec
from lakecore.concurrency.rollback import TABLE_SERVICES
from lakecore.config import LockSpec, TableConfig
from lakecore.errors import AlreadyExists, CorruptMetadata, TableNotFound
from lakecore.layout import build_view
from lakecore.services.clean_plan import CleanPlan
from lakecore.services.clustering_plan import ClusteringPlan
from lakecore.services.compaction_plan import CompactionPlan
from lakecore.services.undo import UndoPlan
from lakecore.storage import Storage
from lakecore.timeline import (
    TIMELINE_DIR,
    CommitMetadata,
    Instant,
    State,
    Timeline,
    TimelineStore,
    now_ms,
    parse_file_name,
)
from lakecore.timeline.history import EMPTY, HISTORY_DIR, Manifest
from lakecore.timeline.history_store import HistoryMoved, HistoryStore, manifest_path, pointer_name
from lakecore.timeline.overwrite import requested_scope

log = logging.getLogger(__name__)

CONFIG_PATH = ".weir/table.json"
QUARANTINE_DIR = ".weir/quarantine"
ProblemKind = Literal["config_missing", "config_corrupt", "instant_corrupt", "plan_corrupt",
                      "history_corrupt", "history_file_corrupt", "data_file_missing"]
ActionKind = Literal["recreate_config", "quarantine_instant", "quarantine_plan", "fall_back_history"]
Clock = Callable[[], int]


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind
    path: str            # relative to the table base
    detail: str
    remedy: str
    repairable: bool     # `weir table repair --run` fixes it

    def describe(self) -> str:
        return f"{self.path}: {self.detail}; {self.remedy}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "detail": self.detail, "remedy": self.remedy,
                "repairable": self.repairable}


@dataclass(frozen=True)
class RepairAction:
    kind: ActionKind
    path: str
    detail: str

    def describe(self) -> str:
        return f"{self.kind.replace('_', ' ')} {self.path}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "detail": self.detail}


@dataclass(frozen=True)
class RepairReport:
    dry_run: bool
    actions: tuple[RepairAction, ...]   # planned (dry run) or done
    remaining: tuple[Problem, ...]      # what no action fixes (after the repair, when it ran)

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "actions": [a.to_json() for a in self.actions],
                "remaining": [p.to_json() for p in self.remaining]}


# -- check (read-only) ----------------------------------------------------------------------------


def check_table(storage: Storage) -> tuple[Problem, ...]:
    """Every problem found: table.json, the history manifest and files, the completed instants, and
    the data files the latest snapshot needs. Reads only."""
    uri = storage.uri
    repair = f"run `weir table repair {uri} --run`"
    problems: list[Problem] = []
    has_timeline = bool(storage.list_names(TIMELINE_DIR))
    try:
        TableConfig.loads(storage.read(CONFIG_PATH), source=CONFIG_PATH, table=uri)
    except FileNotFoundError:
        if not has_timeline:
            raise TableNotFound(f"no table at {uri} (neither {CONFIG_PATH} nor a timeline); check the "
                                "URI") from None
        problems.append(Problem("config_missing", CONFIG_PATH, "missing while the timeline exists",
                                f"{repair} to recreate it from the timeline", True))
    except CorruptMetadata as exc:
        problems.append(Problem("config_corrupt", CONFIG_PATH, _short(exc),
                                f"{repair} to quarantine it and recreate it from the timeline", True))
    store = TimelineStore(storage)
    try:
        timeline = store.load()
    except CorruptMetadata as exc:
        version = HistoryStore(storage).current_version()
        problems.append(Problem("history_corrupt", manifest_path(version), _short(exc),
                                f"{repair} to fall back to the previous manifest and reactivate the "
                                "instants archived since", True))
        timeline = _active_only(storage)
    else:
        problems += _history_files(store, timeline.archived.manifest)
    damaged = store.damaged(timeline)
    for inst, err in damaged:
        problems.append(Problem("instant_corrupt", f"{TIMELINE_DIR}/{inst.file_name}", _short(err),
                                f"{repair} to quarantine it and roll its write back (or restore it "
                                "from a backup to keep its data)", True))
    for inst, err in damaged_plans(store, timeline):
        problems.append(Problem("plan_corrupt", f"{TIMELINE_DIR}/{inst.requested_file()}", _short(err),
                                f"{repair} to quarantine it and "
                                + ("roll the pending service back" if inst.action in TABLE_SERVICES else
                                   f"drop the pending {inst.action}") + ", then run the service again", True))
    if not any(p.kind == "history_corrupt" for p in problems):
        problems += _missing_data_files(storage, store, timeline, {i for i, _ in damaged})
    return tuple(problems)


def _parse_undo(data: bytes, source: str) -> None:
    try:
        body = json.loads(data or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptMetadata(f"{source} is not JSON ({exc!r})") from exc
    if isinstance(body, dict) and "undone" in body:
        UndoPlan.from_json(body, source=source)


PLAN_PARSERS: dict[str, Callable[[bytes, str], object]] = {
    "clean": lambda data, source: CleanPlan.loads(data, source=source),
    "compaction": lambda data, source: CompactionPlan.loads(data, source=source),
    "replacecommit": lambda data, source: requested_scope(data) or ClusteringPlan.loads(data, source=source),
    "restore": _parse_undo,
    "rollback": _parse_undo,
}


def damaged_plans(store: TimelineStore, timeline: Timeline) -> list[tuple[Instant, CorruptMetadata]]:
    """Pending table-service instants whose plan (requested file) does not parse."""
    out = []
    for inst in timeline.pending:
        parse = PLAN_PARSERS.get(inst.action)
        if parse is None:
            continue
        try:
            parse(store.read_plan(inst), f"{TIMELINE_DIR}/{inst.requested_file()}")
        except FileNotFoundError:
            continue
        except CorruptMetadata as exc:
            out.append((inst, exc))
    return out


def _short(exc: BaseException) -> str:
    return str(exc).split("; ")[0]


def _active_only(storage: Storage) -> Timeline:
    """The active timeline without its archived part (when the history manifest is unreadable)."""
    found = (parse_file_name(n) for n in storage.list_names(TIMELINE_DIR))
    return Timeline.of((i for i in found if i is not None), EMPTY)


def _history_files(store: TimelineStore, manifest: Manifest) -> list[Problem]:
    out = []
    for f in manifest.files:
        try:
            store.history.rows(Manifest(files=(f,)), ["requested_time"])
        except HistoryMoved:
            out.append(Problem("history_file_corrupt", f"{HISTORY_DIR}/{f.name}", "missing",
                               "restore it from a backup: time travel into the instants it archived "
                               "fails until then (the latest snapshot does not need it)", False))
        except CorruptMetadata as exc:
            out.append(Problem("history_file_corrupt", f"{HISTORY_DIR}/{f.name}", _short(exc),
                               "restore it from a backup: time travel into the instants it archived "
                               "fails until then (the latest snapshot does not need it)", False))
    return out


def _missing_data_files(storage: Storage, store: TimelineStore, timeline: Timeline,
                        damaged: set[Instant]) -> list[Problem]:
    readable = Timeline(tuple(i for i in timeline.instants if i not in damaged), timeline.archived)
    view = build_view(readable, store.metadata)
    out = []
    for part in view.partitions():
        present = set(storage.list_names(part))
        for s in (s for s in view.slices if s.partition == part):
            for stat in s.files:
                if stat.file_name not in present:
                    out.append(Problem("data_file_missing", stat.path,
                                       f"a data file of file group {stat.file_id} the latest snapshot "
                                       "reads is missing", "restore it from a backup (nothing else "
                                       "holds its rows); reads fail until then", False))
    return out


# -- repair ---------------------------------------------------------------------------------------


def run_repair(storage: Storage, lock: Lock, *, dry_run: bool = True, clock: Clock = now_ms
               ) -> RepairReport:
    """Repair what check_table finds repairable (history first, then instants, then table.json: each
    step needs the one before). Dry run by default: the actions it would take."""
    problems = check_table(storage)
    actions: list[RepairAction] = []
    kinds = {p.kind for p in problems}
    if "history_corrupt" in kinds:
        actions.append(_fall_back_history(storage, lock, dry_run=dry_run, clock=clock))
    for p in problems:
        if p.kind == "instant_corrupt":
            actions.append(_quarantine_instant(storage, lock, p.path, dry_run=dry_run, clock=clock))
        elif p.kind == "plan_corrupt":
            actions.append(_quarantine_plan(storage, lock, p.path, dry_run=dry_run, clock=clock))
    if kinds & {"config_missing", "config_corrupt"}:
        actions.append(_recreate_config(storage, lock, dry_run=dry_run, clock=clock))
    remaining = [p for p in problems if not p.repairable] if dry_run else list(check_table(storage))
    return RepairReport(dry_run, tuple(actions), tuple(remaining))


def repair_lock(storage: Storage) -> Lock:
    """The table's lock for a repair: the one table.json records or, when table.json is lost or
    damaged, the one the newest write recorded (the storage lock when nothing recorded one)."""
    try:
        spec = TableConfig.loads(storage.read(CONFIG_PATH), source=CONFIG_PATH, table=storage.uri).lock
    except (FileNotFoundError, CorruptMetadata):
        recorded = recorded_config(TimelineStore(storage), _loadable(storage))
        spec = TableConfig.from_json(recorded, table=storage.uri).lock if recorded else LockSpec()
    return lock_for_spec(storage, spec)


def quarantine(storage: Storage, path: str, clock: Clock = now_ms) -> str:
    """Move a file into .weir/quarantine/ (copy, then delete: works on every storage); returns where."""
    dest = f"{QUARANTINE_DIR}/{clock()}-{path.replace('/', '__')}"
    data = storage.read(path)
    try:
        storage.write_if_absent(dest, data)
    except AlreadyExists:
        dest = f"{dest}.{uuid.uuid4().hex[:8]}"
        storage.write_if_absent(dest, data)
    storage.delete(path)
    log.info("quarantined %s/%s as %s", storage.uri, path, dest)
    return dest


def _quarantine_instant(storage: Storage, lock: Lock, path: str, *, dry_run: bool, clock: Clock
                        ) -> RepairAction:
    inst = parse_file_name(path.rsplit("/", 1)[-1])
    assert inst is not None and inst.is_completed
    is_write = inst.action in ("commit", "deltacommit") or (inst.action == "replacecommit" and _is_overwrite(
        storage, inst))
    then = ("then roll its write back (its rows are no longer read)" if is_write else
            f"its {inst.action} {inst.requested_time} is pending again: "
            + ("finish it with `weir table compact --resume` / `cluster --resume` or roll it back"
               if inst.action in TABLE_SERVICES else "the next run of that service finishes it"))
    if dry_run:
        return RepairAction("quarantine_instant", path, f"would move it into {QUARANTINE_DIR}/, {then}")
    with lock:
        ensure_held(lock, f"quarantining {path}")
        moved = quarantine(storage, path, clock)
    if is_write:
        rollback_write(storage, lock, Instant(inst.requested_time, inst.action, State.INFLIGHT), clock=clock)
    return RepairAction("quarantine_instant", path, f"moved to {moved}, {then}")


def _quarantine_plan(storage: Storage, lock: Lock, path: str, *, dry_run: bool, clock: Clock
                     ) -> RepairAction:
    inst = parse_file_name(path.rsplit("/", 1)[-1])
    assert inst is not None
    service = inst.action in TABLE_SERVICES
    then = ("then roll the pending service back (its files deleted through its markers)" if service else
            f"and its inflight file: the pending {inst.action} is dropped; run it again")
    if dry_run:
        return RepairAction("quarantine_plan", path, f"would move it into {QUARANTINE_DIR}/, {then}")
    with lock:
        ensure_held(lock, f"quarantining {path}")
        moved = quarantine(storage, path, clock)
        inflight = f"{TIMELINE_DIR}/{inst.inflight_file()}"
        if not service and storage.exists(inflight):
            quarantine(storage, inflight, clock)
    if service:
        rollback_write(storage, lock, Instant(inst.requested_time, inst.action, State.INFLIGHT), clock=clock)
    return RepairAction("quarantine_plan", path, f"moved to {moved}, {then}")


def _is_overwrite(storage: Storage, inst: Instant) -> bool:
    """A replacecommit is a write (an overwrite) when its requested file holds a scope, not a plan."""
    try:
        return requested_scope(TimelineStore(storage).read_plan(inst)) is not None
    except FileNotFoundError:
        return False


def _fall_back_history(storage: Storage, lock: Lock, *, dry_run: bool, clock: Clock) -> RepairAction:
    history = HistoryStore(storage)
    versions = history.pointer_versions()
    newest = versions[-1] if versions else 0
    back_to, manifest = 0, Manifest()
    for v in reversed(versions[:-1]):
        try:
            manifest = history.summary(v).manifest
            back_to = v
            break
        except CorruptMetadata:
            continue
    rows = _archived_after(history, manifest)
    newer = [v for v in versions if v > back_to]
    what = (f"fall back from history version {newest} to {back_to or 'none'}, reactivate the "
            f"{rows.num_rows} instant(s) archived since, quarantine pointer(s)/manifest(s) "
            f"{', '.join(map(str, newer))}")
    if dry_run:
        return RepairAction("fall_back_history", manifest_path(newest), f"would {what}")
    with lock:
        ensure_held(lock, "falling back to an older history version")
        _reactivate(storage, rows)
        for v in newer:  # manifests first: a crash in between leaves a pointer to a missing one: rerun
            if storage.exists(manifest_path(v)):
                quarantine(storage, manifest_path(v), clock)
        for v in newer:
            quarantine(storage, f"{TIMELINE_DIR}/{pointer_name(v)}", clock)
    return RepairAction("fall_back_history", manifest_path(newest), f"did {what}")


def _archived_after(history: HistoryStore, manifest: Manifest) -> pa.Table:
    """History rows archived after `manifest` (completed after its boundary), from every history file
    on storage that `manifest` does not name, one row per instant."""
    named = {f.name for f in manifest.files}
    columns = ["requested_time", "completion_time", "action", "metadata", "plan"]
    parts = []
    for name in sorted(history.storage.list_names(HISTORY_DIR)):
        if not name.startswith("L") or not name.endswith(".parquet") or name in named:
            continue
        try:
            parts.append(history.read_file(name, columns))
        except CorruptMetadata as exc:  # another copy of its rows may be in a merged file
            log.warning("skipping unreadable history file %s: %s", name, exc)
    if not parts:
        return pa.table({c: pa.array([], pa.binary() if c in ("metadata", "plan") else pa.string())
                         for c in columns})
    rows = pa.concat_tables(parts)
    if manifest.boundary:
        rows = rows.filter(pc.greater(rows.column("completion_time"), manifest.boundary))
    # an instant may sit in an L0 file and in the merged file that replaced it: keep one row each
    # (a loop per archived instant, not per record)
    seen: dict[str, int] = {}
    for i, t in enumerate(rows.column("requested_time").to_pylist()):
        seen.setdefault(t, i)
    return rows.take(sorted(seen.values()))


def _reactivate(storage: Storage, rows: pa.Table) -> None:
    """Write the rows' instants back into the active timeline: requested files (plans) first, then
    the completed files (immutable copies of what they held before archival)."""
    entries = list(zip(rows.column("requested_time").to_pylist(), rows.column("completion_time").to_pylist(),
                       rows.column("action").to_pylist(), rows.column("metadata").to_pylist(),
                       rows.column("plan").to_pylist(), strict=True))
    for state in (State.REQUESTED, State.COMPLETED):
        for t, c, action, meta, plan in entries:
            inst = Instant(t, action, state, c if state is State.COMPLETED else None)
            body = (plan or b"") if state is State.REQUESTED else meta
            try:
                storage.write_if_absent(f"{TIMELINE_DIR}/{inst.file_name}", body)
            except AlreadyExists:
                continue


def recorded_config(store: TimelineStore, timeline: Timeline) -> dict[str, Any] | None:
    """The table configuration the newest write recorded, with the newest recorded schema."""
    found: CommitMetadata | None = None
    for inst in reversed(timeline.completed):
        meta = store.metadata(inst)
        if meta.table is not None:
            found = meta
            break
    if found is None and timeline.archived.count:
        for inst in reversed(store.archived_instants(timeline.archived.manifest)):
            meta = store.metadata(inst)
            if meta.table is not None:
                found = meta
                break
    schema = store.latest_schema(timeline)
    if found is None or found.table is None or not schema:
        return None
    return {**found.table, "schema": schema}


def _recreate_config(storage: Storage, lock: Lock, *, dry_run: bool, clock: Clock) -> RepairAction:
    store = TimelineStore(storage)
    timeline = store.load() if not dry_run else _loadable(storage)
    bad = {i for i, _ in store.damaged(timeline)} if dry_run else set()
    readable = Timeline(tuple(i for i in timeline.instants if i not in bad), timeline.archived)
    obj = recorded_config(store, readable)
    if obj is None:
        return RepairAction("recreate_config", CONFIG_PATH,
                            "cannot: no commit on the timeline recorded the table's configuration (tables "
                            "last written before weir recorded it); restore table.json from a backup")
    config = TableConfig.from_json(obj, table=storage.uri)
    what = (f"{config.table_type} table {config.name!r}, record key {list(config.record_key)}, "
            f"{config.buckets} buckets, schema {[f.name for f in config.schema]}")
    if dry_run:
        return RepairAction("recreate_config", CONFIG_PATH, f"would recreate it: {what}")
    with lock:
        ensure_held(lock, "recreating table.json")
        if storage.exists(CONFIG_PATH):
            quarantine(storage, CONFIG_PATH, clock)
        storage.write_if_absent(CONFIG_PATH, config.dumps())
    return RepairAction("recreate_config", CONFIG_PATH, f"recreated it: {what}")


def _loadable(storage: Storage) -> Timeline:
    try:
        return TimelineStore(storage).load()
    except CorruptMetadata:
        return _active_only(storage)
