"""The archived timeline ("history") as values: what archival moved out of the active timeline.

Archival moves the oldest completed instants (a prefix in completion order) into Parquet files under
`.weir/timeline/history/`, organised as a small LSM tree: each archival writes one level-0 file; when
a level holds `fanout` files they are merged into one file of the next level. A versioned manifest
names the files of each level with their time ranges, the newest archived completion time (the
*boundary*), and the *live files*: files written by archived instants that no archived clean deleted,
so the active timeline plus the live files still build every view at or after the boundary.

Pure: the row schema, the manifest, and the vectorized (Arrow) queries over history rows — files as
of a point, the latest slice of every file group, paths deleted by cleans. I/O is in history_store.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import CorruptMetadata, CorruptTimeline
from lakecore.timeline.instant import ACTIONS, Instant, State
from lakecore.timeline.metadata import CommitMetadata, WriteStat

TIMELINE_DIR = ".weir/timeline"         # the active timeline (TimelineStore)
HISTORY_DIR = f"{TIMELINE_DIR}/history"
POINTER_PREFIX = "history-"  # `<timeline>/history-<version>`: the current manifest version

FILE_FIELDS: list[tuple[str, pa.DataType]] = [
    ("partition", pa.string()), ("file_id", pa.string()), ("file", pa.string()), ("kind", pa.string()),
    ("records", pa.int64()), ("deletes", pa.int64()), ("bytes", pa.int64()), ("base_instant", pa.string()),
]
FILE_STRUCT = pa.struct(FILE_FIELDS)
ROW_SCHEMA = pa.schema([
    ("requested_time", pa.string()), ("completion_time", pa.string()), ("action", pa.string()),
    ("metadata", pa.binary()),           # the completed instant file's body (CommitMetadata JSON)
    ("plan", pa.binary()),               # the requested file's body (plans of table services)
    ("files", pa.list_(FILE_STRUCT)),    # the write stats, columnar, for vectorized views
    ("deleted", pa.list_(pa.string())),  # paths a clean deleted
])
LIVE_SCHEMA = pa.schema([*FILE_FIELDS, ("instant_time", pa.string()), ("completion_time", pa.string())])


@dataclass(frozen=True)
class ArchivedFile:
    """A data file written by an archived instant."""

    stat: WriteStat
    instant_time: str
    completion_time: str


@dataclass(frozen=True)
class HistoryFile:
    name: str
    level: int
    instants: int
    min_requested: str
    max_requested: str
    min_completion: str
    max_completion: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "level": self.level, "instants": self.instants,
                "min_requested": self.min_requested, "max_requested": self.max_requested,
                "min_completion": self.min_completion, "max_completion": self.max_completion}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> HistoryFile:
        return cls(str(d["name"]), int(d["level"]), int(d["instants"]), str(d["min_requested"]),
                   str(d["max_requested"]), str(d["min_completion"]), str(d["max_completion"]))

    @classmethod
    def describe(cls, name: str, level: int, rows: pa.Table) -> HistoryFile:
        req, comp = rows.column("requested_time"), rows.column("completion_time")
        return cls(name, level, rows.num_rows, pc.min(req).as_py(), pc.max(req).as_py(),
                   pc.min(comp).as_py(), pc.max(comp).as_py())


@dataclass(frozen=True)
class Manifest:
    version: int = 0
    files: tuple[HistoryFile, ...] = ()
    live: str | None = None                         # name of the live-files Parquet file
    schema: list[dict[str, Any]] | None = None      # newest write schema among archived instants

    @property
    def count(self) -> int:
        return sum(f.instants for f in self.files)

    @property
    def boundary(self) -> str:
        """The newest archived completion time ("" when nothing is archived)."""
        return max((f.max_completion for f in self.files), default="")

    @property
    def first(self) -> str:
        return min((f.min_requested for f in self.files), default="")

    def level(self, n: int) -> list[HistoryFile]:
        return [f for f in self.files if f.level == n]

    def dumps(self) -> bytes:
        return json.dumps({"version": self.version, "files": [f.to_json() for f in self.files],
                           "live": self.live, "schema": self.schema}, separators=(",", ":")).encode()

    @classmethod
    def loads(cls, data: bytes, *, source: str, table: str = "TABLE") -> Manifest:
        try:
            obj = json.loads(data)
            return cls(int(obj["version"]), tuple(HistoryFile.from_json(f) for f in obj["files"]),
                       obj.get("live"), obj.get("schema"))
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError,
                AttributeError) as exc:
            raise CorruptTimeline(
                f"history manifest {source} is truncated or corrupted ({exc!r}); run `weir table repair "
                f"{table} --run` to fall back to the previous manifest and reactivate the instants "
                "archived since (or restore the manifest from a backup)") from exc


class Archived:
    """What the active timeline carries of its archived past: the manifest, the files of the latest
    slices as of the boundary (all a view at or after it needs) and, for clean and the next archival,
    every live file (Arrow, LIVE_SCHEMA: superseded slices a clean has not deleted yet too).

    A loaded timeline's live files are read from the history when first asked for (`read_live`), once:
    most who load a timeline (every writer's begin and commit, under the table lock) need only the
    manifest, and a multi-writer table gets a new history version from every archival. A value, like
    the rest of a timeline: nothing here changes after it was first read."""

    def __init__(self, manifest: Manifest | None = None, files: tuple[ArchivedFile, ...] = (), *,
                 bound: str | None = None, live: pa.Table | None = None,
                 read_live: Callable[[], pa.Table] | None = None) -> None:
        self.manifest = manifest if manifest is not None else Manifest()
        self.bound = bound  # set on views as of a point inside the archived range
        self._files: tuple[ArchivedFile, ...] | None = None if read_live is not None else files
        self._live = live
        self._read_live = read_live
        self._guard = threading.Lock()

    @property
    def live(self) -> pa.Table | None:
        if self._read_live is not None and self._live is None:
            with self._guard:
                if self._live is None:
                    self._live = self._read_live()
        return self._live

    @property
    def files(self) -> tuple[ArchivedFile, ...]:
        if self._files is None:
            live = self.live
            with self._guard:
                if self._files is None:
                    self._files = archived_files(latest_slices(live)) if live is not None else ()
        return self._files

    def every_file(self) -> tuple[ArchivedFile, ...]:
        """All live files of archived instants (as values: for clean, which may delete any of them)."""
        live = self.live
        return archived_files(live) if live is not None else self.files

    def live_table(self) -> pa.Table:
        live = self.live
        return live if live is not None else live_table(self.files)

    @property
    def boundary(self) -> str:
        return self.manifest.boundary

    @property
    def count(self) -> int:
        return self.manifest.count

    @property
    def first(self) -> str:
        return self.manifest.first

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Archived):
            return NotImplemented
        return (self.manifest, self.bound, self.files) == (other.manifest, other.bound, other.files)

    def __hash__(self) -> int:
        return hash((self.manifest.version, self.bound))

    def __getstate__(self) -> dict[str, Any]:  # pickled as read (tasks get what the driver loaded)
        return {"manifest": self.manifest, "bound": self.bound, "files": self.files, "live": self.live}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["manifest"], state["files"], bound=state["bound"],  # type: ignore[misc]
                      live=state["live"])

    def __repr__(self) -> str:
        return f"Archived(version={self.manifest.version}, boundary={self.boundary!r}, bound={self.bound!r})"


EMPTY = Archived()


# -- rows: building and querying ------------------------------------------------------------------


def history_rows(entries: Sequence[tuple[Instant, CommitMetadata, bytes]]) -> pa.Table:
    """History rows for completed instants (with their metadata and requested-file body)."""
    for inst, _, _ in entries:
        if not inst.is_completed:
            raise ValueError(f"only completed instants are archived, not {inst}")
    return pa.Table.from_pydict({
        "requested_time": [i.requested_time for i, _, _ in entries],
        "completion_time": [i.completion_time for i, _, _ in entries],
        "action": [i.action for i, _, _ in entries],
        "metadata": [m.dumps() for _, m, _ in entries],
        "plan": [p for _, _, p in entries],
        "files": [[_stat_row(s) for s in m.write_stats] for _, m, _ in entries],
        "deleted": [[str(p) for p in m.extra.get("deleted", ())] if i.action == "clean" else []
                    for i, m, _ in entries],
    }, schema=ROW_SCHEMA)


def _stat_row(s: WriteStat) -> dict[str, Any]:
    return {"partition": s.partition, "file_id": s.file_id, "file": s.file_name, "kind": s.kind,
            "records": s.records, "deletes": s.deletes, "bytes": s.bytes, "base_instant": s.base_instant}


def instants_of(rows: pa.Table) -> list[Instant]:
    """The rows' instants (completed), in row order."""
    out = []
    for t, c, a in zip(rows.column("requested_time").to_pylist(), rows.column("completion_time").to_pylist(),
                       rows.column("action").to_pylist(), strict=True):
        if a not in ACTIONS:
            raise CorruptMetadata(f"history row {t} has unknown action {a!r}; the history file is corrupted")
        out.append(Instant(t, a, State.COMPLETED, c))
    return out


def files_of(rows: pa.Table) -> pa.Table:
    """One row per data file written by the rows' instants (LIVE_SCHEMA)."""
    if rows.num_rows == 0:
        return LIVE_SCHEMA.empty_table()
    lists = rows.column("files").combine_chunks()
    parents = pc.list_parent_indices(lists)
    flat = pc.list_flatten(lists)
    cols = [flat.field(name) for name, _ in FILE_FIELDS]
    cols += [rows.column("requested_time").take(parents), rows.column("completion_time").take(parents)]
    return pa.Table.from_arrays(cols, schema=LIVE_SCHEMA)


def deleted_of(rows: pa.Table) -> pa.Array:
    """Paths deleted by the cleans among the rows."""
    if rows.num_rows == 0:
        return pa.array([], pa.string())
    return pc.list_flatten(rows.column("deleted").combine_chunks())


def latest_slices(files: pa.Table) -> pa.Table:
    """Of every file group, the files of its latest slice: the newest base (by base instant) and the
    logs completed at or after it (all logs where there is no base), in `files`' order. Vectorized:
    the newest base of each group is found by one sort of the bases, no join."""
    if files.num_rows == 0:
        return files
    is_base = pc.equal(files.column("kind"), "base")
    bases = np.flatnonzero(pc.fill_null(is_base, False).to_numpy(zero_copy_only=False))
    if len(bases) == 0:
        return files
    groups = _group_codes(files)
    instant = files.column("instant_time").combine_chunks()
    newest_first = bases[pc.sort_indices(pa.table({"t": instant.take(pa.array(bases))}),
                                         sort_keys=[("t", "descending")]).to_numpy()]
    codes, first = np.unique(groups[newest_first], return_index=True)
    newest = np.full(int(groups.max()) + 1, -1, dtype=np.int64)
    newest[codes] = newest_first[first]  # the row of each group's newest base, -1 where it has none
    row = newest[groups]
    lb = instant.take(pa.array(row, mask=row < 0))
    keep = pc.if_else(is_base, pc.equal(instant, lb),
                      pc.or_kleene(pc.is_null(lb), pc.greater_equal(files.column("completion_time"), lb)))
    return files.filter(pc.fill_null(keep, False))


def _group_codes(files: pa.Table) -> np.ndarray:
    """One integer per row naming its (partition, file_id)."""
    code = np.zeros(files.num_rows, dtype=np.int64)
    for name in ("partition", "file_id"):
        enc = pc.dictionary_encode(files.column(name)).combine_chunks()
        idx = pc.fill_null(enc.indices, len(enc.dictionary)).to_numpy(zero_copy_only=False)
        code = code * (len(enc.dictionary) + 1) + idx.astype(np.int64)
    return np.unique(code, return_inverse=True)[1].reshape(-1)


def archived_files(files: pa.Table) -> tuple[ArchivedFile, ...]:
    """LIVE_SCHEMA rows as values (for the live files and views: small)."""
    out = []
    for d in files.to_pylist():
        stat = WriteStat(partition=d["partition"], file_id=d["file_id"], file_name=d["file"], kind=d["kind"],
                         records=d["records"], deletes=d["deletes"], bytes=d["bytes"],
                         base_instant=d["base_instant"])
        out.append(ArchivedFile(stat, d["instant_time"], d["completion_time"]))
    return tuple(out)


def live_table(files: Sequence[ArchivedFile]) -> pa.Table:
    rows = [{**_stat_row(f.stat), "instant_time": f.instant_time, "completion_time": f.completion_time}
            for f in files]
    return pa.Table.from_pylist(rows, schema=LIVE_SCHEMA)
