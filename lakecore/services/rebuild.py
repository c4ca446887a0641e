"""Rebuilding a damaged completed instant's metadata from what survives (`weir table repair`).

A completed instant file's name proves the commit (T, C, the action); only its body is lost. The body
is rebuilt from:
- the data files named with T (`<fileId>_<token>_T.parquet`, `.<fileId>_T.log.<v>_<token>`), found by
  one listing of the table, with their footers and op columns: partition, file group, kind, rows,
  deletes, bytes;
- T's requested file: an overwrite's scope, a compaction's or clustering's plan, a clean's plan, a
  rollback's or restore's plan;
- what the damaged bytes still hold (a truncated file keeps a prefix: the operation and the write
  stats written whole), and what other instants say of T's files: plans that merge them, savepoints
  that pin them, cleans that deleted them.
Guessed, and said so under `extra.rebuilt`: a plain write's operation (upsert, delete or bulk_insert,
from its files) unless the bytes kept it. Lost: the extra fields a writer recorded (its name, a
streaming writer's batch id), a savepoint's comment, the files a rollback deleted, the row counts of
T's files a clean deleted since (recorded as 0) or that are damaged themselves.

No rebuild (`Rebuild.metadata` None, `why` says) when a file the evidence names is missing (the commit
would not be whole) or T cannot be attributed (a replacecommit without its requested file, a
savepoint whose target the bytes do not hold). Reads only; repair.py writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.concurrency import view_of
from lakecore.concurrency.transaction import recorded_config
from lakecore.config import COMMIT_TIME, CONFIG_PATH, META_PREFIX, OP, TableConfig, schema_to_json
from lakecore.errors import CorruptMetadata, DamagedFile
from lakecore.formats import file_stats, read_file, read_footer
from lakecore.layout import parse_data_file_name
from lakecore.services.clean_plan import CleanPlan
from lakecore.services.clustering import clustering_extra
from lakecore.services.clustering_plan import ClusteringPlan
from lakecore.services.compaction_plan import CompactionPlan
from lakecore.services.undo import UndoPlan
from lakecore.storage import FileInfo, Storage
from lakecore.timeline import CommitMetadata, Instant, Timeline, TimelineStore, WriteStat, requested_scope
from lakecore.timeline.metadata import FileKind, counted

# a write stat's flat fields; its nested column statistics (last) too when they survived whole (a
# file without them is never skipped, only read)
_STAT = re.compile(r'\{"partition":[^{}]*?(?:\}|,"stats":)')
_DECODER = json.JSONDecoder()
_OPERATION = re.compile(rb'^\{"operation":"([a-z_]+)"')
_SAVEPOINT = re.compile(rb'"(savepointed|deleted_savepoint)":"(\d{17})"')
Files = Mapping[str, Mapping[str, FileInfo]]  # instant time -> data file path -> listing entry


@dataclass(frozen=True)
class Rebuild:
    instant: Instant
    metadata: CommitMetadata | None        # None: cannot be rebuilt (`why`)
    why: str = ""
    files: tuple[str, ...] = ()            # the data files it was rebuilt from
    missing: tuple[str, ...] = ()          # files the evidence names that are gone
    notes: tuple[str, ...] = ()            # what is guessed or unknown
    cleaned: int = 0                       # its files a clean deleted since (known from the clean)

    def describe(self) -> str:
        if self.metadata is None:
            return self.why
        if self.files and self.cleaned:
            source = (f"from its {counted(len(self.files), 'data file')} and the clean that deleted "
                      f"{self.cleaned} more")
        elif self.files or self.cleaned:
            source = f"from its {counted(len(self.files), 'data file')}" if self.files else \
                f"from the clean that deleted its {counted(self.cleaned, 'data file')}"
        else:
            source = "from its plan" if not self.metadata.write_stats and self.instant.action not in (
                "commit", "deltacommit") else "(no data file of it is on storage)"
        return source + (f" ({'; '.join(self.notes)})" if self.notes else "")


@dataclass(frozen=True)
class Salvaged:
    """What the damaged bytes of a completed instant file still say."""

    operation: str | None = None
    stats: tuple[WriteStat, ...] = ()
    savepoint: tuple[str, str] | None = None  # ("savepointed" | "deleted_savepoint", instant time)


def salvage(data: bytes) -> Salvaged:
    """The operation and the write stats written whole in `data` (commit metadata is compact JSON:
    operation first, then the write stats, flat objects but for their column statistics, last).
    Pure."""
    stats = []
    text = data.decode("utf-8", "replace")
    for m in _STAT.finditer(text):
        whole = _whole_object(text, m.start())  # with its column statistics when they survived
        flat = m.group(0).removesuffix(',"stats":') + "}" if m.group(0).endswith(":") else m.group(0)
        try:
            stats.append(WriteStat.from_json(whole if whole is not None else json.loads(flat)))
        except (ValueError, KeyError, TypeError):
            continue
    op = _OPERATION.match(data)
    sp = _SAVEPOINT.search(data)
    return Salvaged(op.group(1).decode() if op else None, tuple(stats),
                    (sp.group(1).decode(), sp.group(2).decode()) if sp else None)


def _whole_object(text: str, start: int) -> dict[str, object] | None:
    try:
        obj, _ = _DECODER.raw_decode(text, start)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


@dataclass
class _Evidence:
    expected: set[str] = field(default_factory=set)   # T's files other metadata names
    cleaned: set[str] = field(default_factory=set)    # T's files cleans deleted


@dataclass(frozen=True)
class _Job:
    """One rebuild's inputs."""

    storage: Storage
    timeline: Timeline                  # the whole active timeline (other instants' plans)
    readable: Timeline                  # without its damaged instants (views, schemas)
    instant: Instant
    present: Mapping[str, FileInfo]     # the data files named with T on storage
    saved: Salvaged


def rebuild_instant(storage: Storage, instant: Instant, damaged: bytes, files: Files, timeline: Timeline,
                    readable: Timeline) -> Rebuild:
    """The rebuilt metadata of the damaged completed `instant` (see the module docstring). `readable`:
    `timeline` without its damaged instants; `files`: data_files(storage)."""
    t = instant.requested_time
    try:
        plan = TimelineStore(storage).read_plan(instant)
    except FileNotFoundError:
        plan = None
    job = _Job(storage, timeline, readable, instant, files.get(t, {}), salvage(damaged))
    action = instant.action
    try:
        if action in ("commit", "deltacommit"):
            return _rebuild_write(job, None)
        scope = requested_scope(plan) if action == "replacecommit" and plan else None
        if scope is not None:
            return _rebuild_write(job, scope.to_json())
        if action in ("replacecommit", "compaction") and plan:
            extra: dict[str, object]
            if action == "compaction":
                compaction = CompactionPlan.loads(plan, source=f"plan of compaction {t}")
                bases = {(o.partition, o.file_id): o.base_instant for o in compaction.operations}
                operation, extra = "compaction", {"strategy": compaction.strategy}
            else:
                clustering = ClusteringPlan.loads(plan, source=f"plan of replacecommit {t}")
                bases = {(o.partition, o.file_id): o.base_instant for o in clustering.operations}
                operation, extra = "clustering", clustering_extra(clustering)
            return _rebuild_from_files(job, operation, extra, bases, service=True)
        if action == "clean" and plan:
            clean = CleanPlan.loads(plan, source=f"plan of clean {t}")
            extra = {**clean.record(), "rebuilt": _mark([], [])}
            return Rebuild(instant, CommitMetadata("clean", (), None, extra))
        if action in ("rollback", "restore") and plan:
            return _rebuild_undo(instant, plan)
        if action == "savepoint":
            return _rebuild_savepoint(job)
    except CorruptMetadata as exc:
        return Rebuild(instant, None, f"its plan does not parse either ({str(exc).split('; ')[0]})")
    if action == "replacecommit":
        return Rebuild(instant, None, "its requested file, which says whether it was a clustering or an "
                                      "overwrite, is gone too")
    return Rebuild(instant, None, "its plan (requested file) is gone too")


def _rebuild_write(job: _Job, overwrite: dict[str, object] | None) -> Rebuild:
    """A write: its operation from the bytes or the overwrite's scope, else guessed from its files."""
    operation = job.saved.operation or (str(overwrite["operation"]) if overwrite else None)
    bases = _previous_bases(job) if job.instant.action == "commit" else {}
    rb = _rebuild_from_files(job, operation or "", {"overwrite": overwrite} if overwrite else {}, bases,
                             service=False)
    if rb.metadata is None:
        return rb
    notes, guessed = list(rb.notes), []
    if operation is None:
        operation = _guess_operation(job.instant, rb.metadata.write_stats)
        guessed.append("operation")
        notes.append(f"operation {operation} guessed from its files")
    notes.append("the extra fields its writer recorded are lost")
    config = _config(job.storage)
    extra = {**rb.metadata.extra, "rebuilt": _mark(guessed, ["extra"])}
    meta = replace(rb.metadata, operation=operation, extra=extra,
                   table=recorded_config(config) if config is not None else None)
    return replace(rb, metadata=meta, notes=tuple(notes))


def _rebuild_from_files(job: _Job, operation: str, extra: dict[str, object],
                        bases: Mapping[tuple[str, str], str | None], *, service: bool) -> Rebuild:
    """Metadata whose write stats are T's files; none when a file the evidence names is missing. A
    service (compaction, clustering) wrote one base per planned file group (`bases`' keys)."""
    evidence = _evidence(job.storage, job.timeline, job.instant.requested_time)
    accounted = set(job.present) | evidence.cleaned
    missing = sorted((evidence.expected | {s.path for s in job.saved.stats}) - accounted)
    groups = {group_of(p) for p in accounted}
    lost = [f"the base file of file group {fid} in {p or '(unpartitioned)'}"
            for p, fid in sorted(set(bases) - groups)] if service else []
    if missing or lost:
        what = [*lost, *missing]
        return Rebuild(job.instant, None, f"{len(what)} data file(s) it wrote are missing "
                                          f"({', '.join(what)})", missing=tuple(missing))
    stats, notes = _stats(job, evidence.cleaned, service=service, bases=bases)
    meta = CommitMetadata(operation, stats, _schema(job), {**extra, "rebuilt": _mark([], [])})
    return Rebuild(job.instant, meta, files=tuple(sorted(job.present)), notes=tuple(notes),
                   cleaned=len(evidence.cleaned - set(job.present)))


def _rebuild_undo(instant: Instant, plan: bytes) -> Rebuild:
    body = json.loads(plan)
    if "undone" in body:  # a rollback of completed instants, or a restore: the plan is the record
        undo = UndoPlan.from_json(body, source=f"plan of {instant}")
        extra = {**undo.to_json(), "rebuilt": _mark([], [])}
        return Rebuild(instant, CommitMetadata(instant.action, (), None, extra))
    extra = {"rolled_back": str(body["rolled_back"]), "action": str(body.get("action", "deltacommit")),
             # those its markers named are lost; a lost write's files, which none named, its plan keeps
             "deleted_files": sorted(str(f) for f in body.get("files", ())),
             "rebuilt": _mark([], ["deleted_files"])}
    return Rebuild(instant, CommitMetadata("rollback", (), None, extra),
                   notes=("the list of files it deleted is lost",))


def _rebuild_savepoint(job: _Job) -> Rebuild:
    if job.saved.savepoint is None:
        return Rebuild(job.instant, None, "which instant it pinned is not in its damaged bytes")
    key, target = job.saved.savepoint
    rebuilt = _mark([], ["comment"])
    if key == "deleted_savepoint":
        return Rebuild(job.instant, CommitMetadata("savepoint", (), None, {key: target, "rebuilt": rebuilt}))
    view = view_of(job.storage, job.readable.as_of(target))  # what create_savepoint pinned
    files = sorted({f.path for s in view.slices for f in s.files})
    extra = {"savepointed": target, "files": files, "comment": "", "rebuilt": rebuilt}
    return Rebuild(job.instant, CommitMetadata("savepoint", (), None, extra), notes=("its comment is lost",))


def _mark(guessed: list[str], lost: list[str]) -> dict[str, object]:
    """`extra.rebuilt`: that repair wrote this body, and which of its fields are guesses or lost."""
    return {"by": "weir table repair", "guessed": guessed, "lost": lost}


def _evidence(storage: Storage, timeline: Timeline, t: str) -> _Evidence:
    """What the other instants' plans and records say of T's files: the plans of compactions and
    clusterings (they merge files), of cleans (they delete them, pending ones too: an inflight clean
    may have), and live savepoints' records (they pin them). Plans, not completed bodies, so that
    damaged instants still count."""
    store = TimelineStore(storage)
    out = _Evidence()
    for inst in timeline.instants:
        if inst.requested_time == t:
            continue
        try:
            if inst.action == "compaction":
                out.expected |= {p for op in CompactionPlan.loads(store.read_plan(inst)).operations
                                 for p in op.paths()}
            elif inst.action == "replacecommit":
                body = store.read_plan(inst)
                if body and requested_scope(body) is None:
                    out.expected |= {p for op in ClusteringPlan.loads(body).operations for p in op.paths()}
            elif inst.action == "clean":
                out.cleaned |= set(CleanPlan.loads(store.read_plan(inst)).files)
            elif inst.action == "savepoint" and inst.is_completed:
                out.expected |= {str(p) for p in store.metadata(inst).extra.get("files", ())}
        except (FileNotFoundError, CorruptMetadata):
            continue
    mine = {p for p in out.expected | out.cleaned if instant_of(p) == t}
    return _Evidence((out.expected & mine) - out.cleaned, out.cleaned & mine)


def _stats(job: _Job, cleaned: set[str], *, service: bool, bases: Mapping[tuple[str, str], str | None]
           ) -> tuple[tuple[WriteStat, ...], list[str]]:
    """T's write stats: exact where the damaged bytes kept them whole, else from each file's footer
    and op column; a damaged or cleaned file's row count is unknown (recorded as 0, size 0: `weir
    table check` compares neither)."""
    known = {s.path: s for s in job.saved.stats}
    stats, damaged = [], []
    for path in sorted(job.present):
        if path in known:  # salvaged whole but for its column statistics, read again from the file
            saved = known[path]
            stats.append(saved if saved.stats is not None else _with_column_stats(job, saved))
            continue
        try:
            stats.append(_stat_of(job, path, service, bases))
        except DamagedFile:
            damaged.append(path)
            stats.append(_bare(path))
    notes = [f"the row count of damaged file(s) {', '.join(damaged)} is unknown (`weir table check` "
             "reports them)"] if damaged else []
    gone = sorted(cleaned - set(job.present))
    stats += [known.get(p) or _bare(p) for p in gone]
    if any(p not in known for p in gone):
        notes.append(f"the row counts of {len(gone)} file(s) a clean deleted are unknown (recorded as 0)")
    return tuple(sorted(stats, key=lambda s: (s.partition, s.file_id, s.file_name))), notes


def _stat_of(job: _Job, path: str, service: bool, bases: Mapping[tuple[str, str], str | None]) -> WriteStat:
    partition, fid, name, kind = _parts(path)
    size = job.present[path].size
    cols = read_file(job.storage, path)  # all of it: the column statistics are the write's too
    stats = file_stats(cols).to_json()
    ops = cols.column(OP) if OP in cols.column_names else None
    dead = int(pc.sum(pc.equal(ops, 1)).as_py() or 0) if ops is not None else 0
    if kind == "log":
        return WriteStat(partition, fid, name, "log", cols.num_rows, dead, size, stats=stats)
    deletes = dead  # a rewrite records the tombstones it kept; a write the deletes it made
    if not service and ops is not None and COMMIT_TIME in cols.column_names:
        mine = pc.and_(pc.equal(ops, 1), pc.equal(cols.column(COMMIT_TIME), int(job.instant.requested_time)))
        deletes = int(pc.sum(mine).as_py() or 0)
    return WriteStat(partition, fid, name, "base", cols.num_rows - dead, deletes, size,
                     base_instant=bases.get((partition, fid)), stats=stats)


def _with_column_stats(job: _Job, stat: WriteStat) -> WriteStat:
    try:
        return replace(stat, stats=file_stats(read_file(job.storage, stat.path)).to_json())
    except DamagedFile:
        return stat  # without statistics: never skipped, only read


def _bare(path: str) -> WriteStat:
    partition, fid, name, kind = _parts(path)
    return WriteStat(partition, fid, name, kind, 0, 0, 0)


def _parts(path: str) -> tuple[str, str, str, FileKind]:
    partition, _, name = path.rpartition("/")
    parsed = parse_data_file_name(name)
    assert parsed is not None, path
    return partition, parsed.file_id, name, parsed.kind


def group_of(path: str) -> tuple[str, str]:
    """(partition, file id) of a data file path."""
    partition, fid, _, _ = _parts(path)
    return partition, fid


def instant_of(path: str) -> str | None:
    """The instant a data file path's name carries (None: not a data file name)."""
    parsed = parse_data_file_name(path.rsplit("/", 1)[-1])
    return parsed.instant_time if parsed else None


def _guess_operation(instant: Instant, stats: tuple[WriteStat, ...]) -> str:
    if instant.action == "commit":
        return "upsert"
    if any(s.kind == "base" for s in stats):
        return "bulk_insert"
    rows = sum(s.records for s in stats)
    return "delete" if rows and rows == sum(s.deletes for s in stats) else "upsert"


def _before(job: _Job) -> Timeline:
    """The readable timeline as of just before T completed."""
    completion = job.instant.completion_time or ""
    return job.readable.as_of(str(int(completion) - 1).zfill(len(completion)) if completion else "")


def _previous_bases(job: _Job) -> dict[tuple[str, str], str | None]:
    """Each file group's base instant before T (what a copy-on-write write merged with)."""
    return {(s.partition, s.file_id): s.base_instant for s in view_of(job.storage, _before(job)).slices}


def _schema(job: _Job) -> list[dict[str, object]] | None:
    """The schema recorded before T, with any column T's files add (a write that evolved it)."""
    recorded = TimelineStore(job.storage).latest_schema(_before(job))
    if recorded is None:
        config = _config(job.storage)
        if config is None:
            return None
        recorded = schema_to_json(config.schema)
    names = {str(f["name"]) for f in recorded}
    added = []
    for path in sorted(job.present):
        try:
            fields = read_footer(job.storage, path).schema
        except DamagedFile:
            continue
        for f in fields:
            if f.name not in names and not f.name.startswith(META_PREFIX):
                names.add(f.name)
                added.append(f)
    return [*recorded, *schema_to_json(pa.schema(added))] if added else list(recorded)


def _config(storage: Storage) -> TableConfig | None:
    try:
        return TableConfig.loads(storage.read(CONFIG_PATH), source=CONFIG_PATH, table=storage.uri)
    except (FileNotFoundError, CorruptMetadata):
        return None
