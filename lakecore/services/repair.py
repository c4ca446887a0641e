"""Checking and repairing a table (`weir table check`, `weir table repair`).

Owns what counts as damage (`check_table`: read-only, one Problem per finding), how each kind is
repaired (`run_repair`: dry run by default; with dry_run=False under the table lock) and what the
commands' exit codes say (`exit_code`). A repair never deletes metadata: a file it replaces or moves
aside is kept in `.weir/quarantine/`.

    table.json missing or unreadable   -> recreate it from the newest write's recorded configuration
                                          (CommitMetadata.table) and the newest recorded schema
    a completed instant does not parse -> rebuild its body from the instant's data files and plan
                                          (rebuild.py) and replace it in place (atomically, under the
                                          lock; the damaged bytes are kept in quarantine). When a file
                                          it wrote is missing, or it cannot be attributed: quarantine
                                          it; a write is then rolled back (its rows are no longer read;
                                          its data files stay), a table service's instant is pending again
    the newest history manifest is     -> fall back to the newest kept version that parses and
      missing or does not parse           reactivate the instants archived since (repair_history.py)
    a completed write's instant file   -> reported (a human knows whether it completed); told so
      is lost (a pending write whose      (`complete_lost`), write it again (lost_instants.py): rebuilt
      data files have no markers)         like a damaged one, with a completion time that keeps what
                                          readers saw
    a pending table service's plan     -> quarantine it; a pending compaction or clustering is then
      does not parse                      rolled back (its files deleted through its markers), a
                                          pending clean, restore or rollback dropped: run it again
    a history file does not parse, a   -> reported only, with the remedy that loses least (verify.py):
      data file the latest view reads     restore it from a backup, or roll back the instant that
      is missing or damaged               wrote it when that loses nothing
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, Literal

from lakecore.concurrency import Lock, ensure_held, rollback_write
from lakecore.concurrency.liveness.heartbeat import mark_aborted
from lakecore.concurrency.locks.choice import lock_for_spec
from lakecore.concurrency.rollback import TABLE_SERVICES
from lakecore.config import CONFIG_PATH, LockSpec, TableConfig
from lakecore.errors import CorruptMetadata, HistoryMoved, InvalidInput, TableNotFound
from lakecore.layout import build_view
from lakecore.layout.listing import data_files
from lakecore.services.clean_plan import CleanPlan
from lakecore.services.clustering_plan import ClusteringPlan
from lakecore.services.compaction_plan import CompactionPlan
from lakecore.services.lost_instants import LostWrite, complete_lost, lost_writes
from lakecore.services.quarantine import QUARANTINE_DIR, keep_copy, quarantine
from lakecore.services.rebuild import Rebuild, rebuild_instant
from lakecore.services.repair_history import fall_back_history
from lakecore.services.undo import UndoPlan
from lakecore.services.verify import verify_files
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
from lakecore.timeline.history_store import HistoryStore, manifest_path
from lakecore.timeline.metadata import counted
from lakecore.timeline.overwrite import requested_scope
from lakecore.write import delete_markers, prune_marker_dirs

log = logging.getLogger(__name__)

ProblemKind = Literal["config_missing", "config_corrupt", "instant_corrupt", "instant_lost", "plan_corrupt",
                      "history_corrupt", "history_file_corrupt", "data_file_missing", "data_file_damaged"]
ActionKind = Literal["recreate_config", "rebuild_instant", "complete_lost_write", "quarantine_instant",
                     "quarantine_plan", "fall_back_history"]
Clock = Callable[[], int]

# What `weir table check` and `weir table repair` (dry run or --run) exit with: the state of the table
# as the command leaves it. 1 is every weir command's "the command itself failed".
HEALTHY, REPAIRABLE, NEEDS_A_HUMAN = 0, 2, 3


@dataclass(frozen=True)
class Problem:
    kind: ProblemKind
    path: str            # relative to the table base
    detail: str
    remedy: str
    repairable: bool     # `weir table repair --run` fixes it
    instant: str | None = None  # the instant the file belongs to (data files: the one that wrote it)

    def describe(self) -> str:
        return f"{self.path}: {self.detail}; {self.remedy}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "detail": self.detail, "remedy": self.remedy,
                "repairable": self.repairable, "instant": self.instant}


@dataclass(frozen=True)
class RepairAction:
    kind: ActionKind
    path: str
    detail: str
    warning: str = ""    # what the action loses (a write rolled back), said on its own line

    def describe(self) -> str:
        return f"{self.kind.replace('_', ' ')} {self.path}: {self.detail}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": self.path, "detail": self.detail, "warning": self.warning or None}


@dataclass(frozen=True)
class RepairReport:
    dry_run: bool
    actions: tuple[RepairAction, ...]   # planned (dry run) or done
    remaining: tuple[Problem, ...]      # dry run: every problem found; run: what is left after it

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "actions": [a.to_json() for a in self.actions],
                "remaining": [p.to_json() for p in self.remaining], "exit_code": exit_code(self.remaining)}


def exit_code(problems: tuple[Problem, ...] | list[Problem]) -> int:
    """0 nothing wrong; 2 only problems `weir table repair --run` fixes; 3 a problem a human must fix
    (restore a file from a backup, ...), whatever else there is. Pure."""
    if not problems:
        return HEALTHY
    return REPAIRABLE if all(p.repairable for p in problems) else NEEDS_A_HUMAN


# -- check (read-only) ----------------------------------------------------------------------------


def check_table(storage: Storage, *, deep: bool = False) -> tuple[Problem, ...]:
    """Every problem found: table.json, the history manifest and files, the completed instants, and
    the data files the latest snapshot reads (their footers; `deep`: every page). Reads only."""
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
        problems.append(Problem("config_missing", CONFIG_PATH, "missing while the timeline exists", "", True))
    except CorruptMetadata as exc:
        problems.append(Problem("config_corrupt", CONFIG_PATH, _short(exc), "", True))
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
    readable = _without(timeline, {i for i, _ in damaged})
    for rb, err in zip(rebuilds(storage, timeline, [i for i, _ in damaged]), (e for _, e in damaged),
                       strict=True):
        problems.append(Problem("instant_corrupt", f"{TIMELINE_DIR}/{rb.instant.file_name}", _short(err),
                                _instant_remedy(storage, rb), True, rb.instant.requested_time))
    for inst, err in damaged_plans(store, timeline):
        problems.append(Problem("plan_corrupt", f"{TIMELINE_DIR}/{inst.requested_file()}", _short(err),
                                f"{repair} to quarantine it and "
                                + ("roll the pending service back" if inst.action in TABLE_SERVICES else
                                   f"drop the pending {inst.action}") + ", then run the service again", True,
                                inst.requested_time))
    for lw in lost_writes(storage, readable):   # a human decides: did it complete?
        problems.append(Problem("instant_lost", lw.path, _lost_detail(lw), _lost_remedy(storage, lw), False,
                                lw.instant.requested_time))
    problems = [_config_remedy(p, store, readable, repair) if p.kind.startswith("config_") else p
                for p in problems]
    if not any(p.kind == "history_corrupt" for p in problems):
        view = build_view(readable, store.metadata)
        for f in verify_files(storage, readable, view, store.metadata, deep=deep):
            by = f" (written by instant {f.instant})" if f.instant else ""
            kind: ProblemKind = "data_file_missing" if f.state == "missing" else "data_file_damaged"
            problems.append(Problem(kind, f.stat.path, f"{f.detail}{by}", f.remedy, False, f.instant))
    return tuple(problems)


def rebuilds(storage: Storage, timeline: Timeline, damaged: list[Instant]) -> list[Rebuild]:
    """How each damaged completed instant would be rebuilt (or why it cannot be). Reads only."""
    if not damaged:
        return []
    files = data_files(storage)
    readable = _without(timeline, set(damaged))
    return [rebuild_instant(storage, i, _bytes(storage, i), files, timeline, readable) for i in damaged]


def _bytes(storage: Storage, inst: Instant) -> bytes:
    try:
        return storage.read(f"{TIMELINE_DIR}/{inst.file_name}")
    except FileNotFoundError:
        return b""


def _instant_remedy(storage: Storage, rb: Rebuild) -> str:
    cmd = f"`weir table repair {storage.uri} --run`"
    if rb.metadata is not None:
        return (f"run {cmd} to rebuild it {rb.describe()}; every row of those files is read again (a data "
                "file of it lost as well cannot be told from what is left: if you know of one, restore it "
                "from a backup first)")
    if _is_write(storage, rb.instant):
        return (f"restore the missing data file(s), or the instant file, from a backup, then run {cmd} to "
                f"rebuild the instant; without a backup, {cmd} rolls its write back ({rb.why}): its rows "
                "are then no longer read")
    return f"run {cmd} to quarantine it ({rb.why}): its {rb.instant.action} is then pending again"


def _lost_detail(lw: LostWrite) -> str:
    t, n = lw.instant.requested_time, len(lw.files)
    return (f"write {t} looks pending, but its {counted(n, 'data file')} {'has' if n == 1 else 'have'} no "
            "markers, which a write deletes only once it completed: its completed instant file "
            f"({t}_<completion time>.{lw.instant.action}) is lost (deleted, or left out of a restore), or, "
            "after a crash on a file system that kept the files but not the markers, it never completed. It "
            "is not rolled back; its rows are not read")


def _lost_remedy(storage: Storage, lw: LostWrite) -> str:
    t, action = lw.instant.requested_time, lw.instant.action
    restore = f"restore {TIMELINE_DIR}/{t}_*.{action} from a backup if you have it"
    give_up = (f"if it did not complete (its writer failed or was killed), `weir table rollback "
               f"{storage.uri} {t} --yes` drops it and deletes its data files (its dry run, without --yes, "
               "lists them)")
    if lw.rebuild.metadata is None:
        return f"{restore} ({lw.rebuild.why}); {give_up}"
    return (f"{restore}; if you know it completed (its writer reported it), `weir table repair {storage.uri} "
            f"--run --complete-lost {t}` writes it again {lw.rebuild.describe()}; {give_up}")


def _config_remedy(p: Problem, store: TimelineStore, readable: Timeline, repair: str) -> Problem:
    """table.json's remedy: recreated from the timeline when a write recorded the configuration."""
    if recorded_config(store, readable) is None:
        return Problem(p.kind, p.path, p.detail, "no commit on the timeline recorded the table's "
                       "configuration (tables last written before weir recorded it): restore table.json "
                       "from a backup", False)
    what = "recreate it" if p.kind == "config_missing" else "quarantine it and recreate it"
    return Problem(p.kind, p.path, p.detail, f"{repair} to {what} from the timeline", True)


def _without(timeline: Timeline, damaged: set[Instant]) -> Timeline:
    return Timeline(tuple(i for i in timeline.instants if i not in damaged), timeline.archived)


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


# -- repair ---------------------------------------------------------------------------------------


def run_repair(storage: Storage, lock: Lock, *, dry_run: bool = True, clock: Clock = now_ms,
               complete_lost: Collection[str] = ()) -> RepairReport:
    """Repair what check_table finds repairable (history first, then instants, then table.json: each
    step needs the one before). Dry run by default: the actions it would take. A run also removes
    the empty marker directories older versions left. `complete_lost`: writes check reports as
    instant_lost whose completed instant file to write again (a human knows they completed);
    InvalidInput naming one that is not such a write."""
    problems = check_table(storage)
    actions: list[RepairAction] = []
    kinds = {p.kind for p in problems}
    if "history_corrupt" in kinds:
        path, what = fall_back_history(storage, lock, dry_run=dry_run, clock=clock)
        actions.append(RepairAction("fall_back_history", path, what))
    store = TimelineStore(storage)
    timeline = _loadable(storage)
    damaged = [inst for inst, _ in store.damaged(timeline)]
    for rb in rebuilds(storage, timeline, damaged):
        actions.append(_repair_instant(storage, lock, rb, dry_run=dry_run, clock=clock))
    actions += _complete_lost_writes(storage, lock, set(complete_lost), dry_run=dry_run)
    for p in problems:
        if p.kind == "plan_corrupt":
            actions.append(_quarantine_plan(storage, lock, p.path, dry_run=dry_run, clock=clock))
    if kinds & {"config_missing", "config_corrupt"}:
        actions.append(_recreate_config(storage, lock, dry_run=dry_run, clock=clock))
    if dry_run:
        return RepairReport(True, tuple(actions), problems)
    loaded = _loadable(storage)
    prune_marker_dirs(storage, {i.requested_time for i in loaded.pending}, loaded.newest_time())
    return RepairReport(False, tuple(actions), check_table(storage))


def repair_lock(storage: Storage) -> Lock:
    """The table's lock for a repair: the one table.json records or, when table.json is lost or
    damaged, the one the newest write recorded (the storage lock when nothing recorded one)."""
    try:
        spec = TableConfig.loads(storage.read(CONFIG_PATH), source=CONFIG_PATH, table=storage.uri).lock
    except (FileNotFoundError, CorruptMetadata):
        recorded = recorded_config(TimelineStore(storage), _loadable(storage))
        spec = TableConfig.from_json(recorded, table=storage.uri).lock if recorded else LockSpec()
    return lock_for_spec(storage, spec)


def _repair_instant(storage: Storage, lock: Lock, rb: Rebuild, *, dry_run: bool, clock: Clock
                    ) -> RepairAction:
    """Rebuild a damaged completed instant in place or, when it cannot be rebuilt, quarantine it."""
    path = f"{TIMELINE_DIR}/{rb.instant.file_name}"
    if rb.metadata is None:
        return _quarantine_instant(storage, lock, rb, dry_run=dry_run, clock=clock)
    what = f"rebuild it {rb.describe()}"
    if dry_run:
        return RepairAction("rebuild_instant", path, f"would {what}")
    store = TimelineStore(storage)
    with lock:
        ensure_held(lock, f"rebuilding {path}")
        if not store.damaged(Timeline((rb.instant,))):
            return RepairAction("rebuild_instant", path, "left as it is: it parses now (restored meanwhile)")
        kept = keep_copy(storage, path, clock)
        store.replace_damaged(rb.instant, rb.metadata)
    log.info("rebuilt the damaged instant file %s/%s %s; its damaged bytes are in %s", storage.uri, path,
             rb.describe(), kept)
    return RepairAction("rebuild_instant", path, f"rebuilt it {rb.describe()}; the damaged bytes are kept "
                                                 f"as {kept}")


def _complete_lost_writes(storage: Storage, lock: Lock, wanted: set[str], *, dry_run: bool
                          ) -> list[RepairAction]:
    """Write the lost completed instant files of `wanted` again, oldest first, each rebuilt on a timeline
    that holds the ones before it (a copy-on-write write's base merged theirs)."""
    if not wanted:
        return []
    lost = lost_writes(storage, _loadable(storage))
    found = {lw.instant.requested_time: lw for lw in lost}
    unknown = sorted(wanted - set(found))
    if unknown:
        said = ", ".join(sorted(found)) or "none"
        raise InvalidInput(f"{', '.join(unknown)} is not a pending write whose completed instant file is "
                           f"lost (those of {storage.uri}: {said}); `weir table check {storage.uri}` lists "
                           "them")
    cannot = [found[t] for t in sorted(wanted) if found[t].rebuild.metadata is None]
    if cannot:
        raise InvalidInput(f"write {cannot[0].instant.requested_time} cannot be written again: "
                           f"{cannot[0].rebuild.why}; restore its instant file from a backup, or roll it "
                           "back")
    if dry_run:
        return [_complete_lost(storage, lock, found[t], dry_run=True) for t in sorted(wanted)]
    actions: list[RepairAction] = []
    for t in sorted(wanted):   # each rebuilt after the ones before it are complete again
        lw = next((lw for lw in lost_writes(storage, _loadable(storage)) if lw.instant.requested_time == t),
                  None)
        if lw is not None and lw.rebuild.metadata is not None:
            actions.append(_complete_lost(storage, lock, lw, dry_run=False))
    return actions


def _complete_lost(storage: Storage, lock: Lock, lw: LostWrite, *, dry_run: bool) -> RepairAction:
    """Write a lost write's completed instant file again."""
    what = f"its completed instant file {lw.rebuild.describe()}"
    if dry_run:
        return RepairAction("complete_lost_write", lw.path, f"would write {what}")
    done = complete_lost(storage, lock, lw)
    if isinstance(done, str):
        return RepairAction("complete_lost_write", lw.path, done)
    log.info("wrote the lost completed instant file %s/%s/%s again %s", storage.uri, TIMELINE_DIR,
             done.file_name, lw.rebuild.describe())
    return RepairAction("complete_lost_write", f"{TIMELINE_DIR}/{done.file_name}", f"wrote {what}")


def _quarantine_instant(storage: Storage, lock: Lock, rb: Rebuild, *, dry_run: bool, clock: Clock
                        ) -> RepairAction:
    inst = rb.instant
    path = f"{TIMELINE_DIR}/{inst.file_name}"
    is_write = _is_write(storage, inst)
    then = (f"then roll its write back ({rb.why})" if is_write else
            f"its {inst.action} {inst.requested_time} is pending again ({rb.why}): "
            + ("finish it with `weir table compact --resume` / `cluster --resume` or roll it back"
               if inst.action in TABLE_SERVICES else "the next run of that service finishes it"))
    lost = (f"write {inst.requested_time} {'would be' if dry_run else 'is'} rolled back: its rows are no "
            f"longer read, because {rb.why}; the data files it left stay on storage, unread"
            if is_write else "")
    if dry_run:
        keep = ("; to keep its rows, restore the missing file(s) from a backup first: the repair then "
                "rebuilds the instant instead") if is_write else ""
        return RepairAction("quarantine_instant", path, f"would move it into {QUARANTINE_DIR}/, {then}",
                            lost + keep)
    with lock:
        ensure_held(lock, f"quarantining {path}")
        if is_write:  # given up: never taken for a completed write whose file was lost (rollback.py)
            mark_aborted(storage, inst.requested_time, "weir table repair", clock())
            delete_markers(storage, inst.requested_time)  # so the rollback deletes none of its data files
        moved = quarantine(storage, path, clock)
    if is_write:
        rollback_write(storage, lock, Instant(inst.requested_time, inst.action, State.INFLIGHT), clock=clock)
        log.info("repair of %s: %s", storage.uri, lost)
    return RepairAction("quarantine_instant", path, f"moved to {moved}, {then}", lost)


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


def _is_write(storage: Storage, inst: Instant) -> bool:
    """A data write: a commit or deltacommit, or a replacecommit whose requested file holds an
    overwrite's scope (not a clustering's plan)."""
    if inst.action in ("commit", "deltacommit"):
        return True
    if inst.action != "replacecommit":
        return False
    try:
        return requested_scope(TimelineStore(storage).read_plan(inst)) is not None
    except FileNotFoundError:
        return False


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
    # what only table.json holds between writes: changed after the newest write, the timeline lacks it
    hours = config.tombstone_retention_hours
    unknown = (f"settings changed since the newest write that recorded them are not on the timeline and come "
               f"back as it recorded them (codec {config.compression}, tombstone retention "
               f"{'unset' if hours is None else hours}, "
               f"lock {config.lock.provider}, no column added without a write): set any you changed since "
               "again (weir table set-compression / set-lock, Table.add_columns, or the LakeTable's spec)")
    if dry_run:
        return RepairAction("recreate_config", CONFIG_PATH, f"would recreate it: {what}", unknown)
    with lock:
        ensure_held(lock, "recreating table.json")
        if storage.exists(CONFIG_PATH):
            quarantine(storage, CONFIG_PATH, clock)
        storage.write_if_absent(CONFIG_PATH, config.dumps())
    return RepairAction("recreate_config", CONFIG_PATH, f"recreated it: {what}", unknown)


def _loadable(storage: Storage) -> Timeline:
    try:
        return TimelineStore(storage).load()
    except CorruptMetadata:
        return _active_only(storage)
