"""Verifying a table's data files (`weir table check`): every file the latest snapshot reads exists,
has the size its instant recorded, and a footer that reads, with as many rows as its write stats say;
`deep` also decodes every page. Read-only. Each finding names the instant that wrote the file and the
remedy that loses least (`remedy`, pure): a backup first; rolling an instant back only when that loses
nothing (a compaction or clustering whose merged files still exist) or, said as such, as the last
resort for a write.

Cost: one listing per partition (names and sizes) and one footer read per file, on a small thread pool
(an object store: one ranged GET each); `deep` reads every file whole, i.e. the table's size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lakecore.concurrency import view_of
from lakecore.errors import DamagedFile
from lakecore.formats import map_files, read_file, read_footer
from lakecore.layout import FileSystemView, parse_data_file_name
from lakecore.services.undo import rollback_blocker
from lakecore.storage import Storage
from lakecore.timeline import CommitMetadata, Instant, Timeline, WriteStat, scope_of

State = Literal["missing", "damaged"]


@dataclass(frozen=True)
class FileFinding:
    stat: WriteStat
    instant: str | None     # the instant that wrote it (from its name)
    state: State
    detail: str             # what is wrong, e.g. "truncated: 812 of 9,204 bytes"
    remedy: str


@dataclass(frozen=True)
class Facts:
    """What decides the remedy of one damaged or missing data file."""

    uri: str
    instant: str | None
    action: str | None          # what wrote it, when that instant is on the active timeline
    rewrite: bool               # a compaction or clustering: it merged files that may still exist
    blocker: str | None         # why the instant cannot be rolled back alone (None: it can)
    merged_exist: bool          # a rewrite: every file it merged for this file group still exists
    rows: int                   # a write: the rows the instant wrote, and in how many files
    files: int


def remedy(f: Facts) -> str:
    """The remedy of a damaged or missing data file, least loss first. Pure."""
    out = ("restore it from a backup (on versioned storage: its previous object version); reads of the "
           "latest snapshot fail until then")
    if f.instant is None or f.action is None:
        return out + (f" (instant {f.instant} is archived: it cannot be rolled back)" if f.instant else "")
    what = f"{f.action} {f.instant}"
    if f.blocker is not None:
        return out + f"; {what} cannot be rolled back alone ({f.blocker})"
    undo = f"`weir table rollback {f.uri} {f.instant} --yes`"
    if f.rewrite:
        if f.merged_exist:
            return out + (f"; or roll {what} back with {undo}: the files it merged still exist, so nothing "
                          "is lost (compact or cluster again afterwards)")
        return out + f"; the files {what} merged are gone, so only a backup holds these rows"
    undone = ("keys it updated read their earlier values again, keys it deleted come back, keys it "
              "inserted are gone")
    if f.files <= 1:
        return out + (f"; without a backup its rows are lost: {undo} makes the table readable again by "
                      f"undoing {what} (it wrote only this file: {undone}): write them again from its "
                      "source afterwards")
    return out + (f"; without a backup this file's rows are lost: {undo} makes the table readable again "
                  f"by undoing all of {what}, its intact files too ({f.rows} rows in {f.files} files: "
                  f"{undone}): write them again from its source afterwards")


def row_count_problem(stat: WriteStat, rows: int) -> str | None:
    """Whether a file's footer row count contradicts its write stat (a base file also holds its
    tombstones; a count of 0 is unknown: repair recorded it for a file it could not read). Pure."""
    if stat.records == 0:
        return None
    if stat.kind == "log" and rows != stat.records:
        return f"it holds {rows:,} rows where its instant recorded {stat.records:,}"
    if stat.kind == "base" and rows < stat.records:
        return f"it holds {rows:,} rows where its instant recorded {stat.records:,} live ones"
    return None


def verify_files(storage: Storage, timeline: Timeline, view: FileSystemView,
                 metadata: Callable[[Instant], CommitMetadata], *, deep: bool = False) -> list[FileFinding]:
    """Findings for the files of `view` (the latest view of `timeline`, its readable instants)."""
    sizes: dict[str, int] = {}
    for part in view.partitions():
        sizes.update({f.path: f.size for f in storage.list_dir(part)})
    found: list[tuple[WriteStat, State, str]] = []
    readable = []
    for stat in (f for s in view.slices for f in s.files):
        size = sizes.get(stat.path)
        if size is None:
            found.append((stat, "missing", "missing"))
        elif stat.bytes and size != stat.bytes:
            what = "truncated" if size < stat.bytes else "grown"
            found.append((stat, "damaged", f"{what}: {size:,} bytes where its instant wrote {stat.bytes:,}"))
        else:
            readable.append(stat)
    for stat, problem in zip(readable, map_files(lambda p: _read_problem(storage, p, deep),
                                                 [s.path for s in readable]), strict=True):
        rows, error = problem
        detail = error or (row_count_problem(stat, rows) if rows is not None else None)
        if detail:
            found.append((stat, "damaged", detail))
    return [FileFinding(stat, _instant_of(stat), state, detail,
                        remedy(_facts(storage, timeline, metadata, stat, sizes)))
            for stat, state, detail in found]


def _read_problem(storage: Storage, path: str, deep: bool) -> tuple[int | None, str | None]:
    """(rows, None), or (None, what fails): the footer, then with `deep` every page."""
    try:
        rows = read_footer(storage, path).rows
    except DamagedFile as exc:
        return None, f"its Parquet footer does not read ({_cause(exc)})"
    if deep:
        try:
            rows = read_file(storage, path).num_rows
        except DamagedFile as exc:
            return None, f"its pages do not decode ({_cause(exc)})"
    return rows, None


def _cause(exc: DamagedFile) -> str:
    cause = exc.__cause__
    return " ".join(str(cause).split()).rstrip(".") if cause is not None else str(exc)


def _instant_of(stat: WriteStat) -> str | None:
    parsed = parse_data_file_name(stat.file_name)
    return parsed.instant_time if parsed else None


def _facts(storage: Storage, timeline: Timeline, metadata: Callable[[Instant], CommitMetadata],
           stat: WriteStat, sizes: dict[str, int]) -> Facts:
    t = _instant_of(stat)
    inst = timeline.find(t) if t is not None else None
    if inst is None or not inst.is_completed:
        return Facts(storage.uri, t, None, False, None, False, 0, 0)
    meta = metadata(inst)
    rewrite = inst.action == "compaction" or (inst.action == "replacecommit" and scope_of(meta) is None)
    merged_exist = False
    if rewrite:
        before = Timeline(tuple(i for i in timeline.instants if i != inst), timeline.archived)
        previous = view_of(storage, before).slice_of(stat.partition, stat.file_id)
        merged_exist = previous is not None and all(f.path in sizes for f in previous.files)
    blocker = rollback_blocker(storage, timeline, inst)
    return Facts(storage.uri, t, inst.action, rewrite, blocker, merged_exist, meta.records,
                 len(meta.write_stats))
