"""The archived timeline on storage: `.weir/timeline/history/` (see timeline.history for the model).

Files, all immutable and created with create-if-absent:
    history/L<level>-<min completion>-<max completion>-<token>.parquet   history rows (ROW_SCHEMA)
    history/live-<version>-<token>.parquet                               live files (LIVE_SCHEMA)
    history/manifest-<version>.json                                      the files of that version
    timeline/history-<version>                                           pointer: the current version

The pointer sits in the active timeline directory, so the one listing that loads the active timeline
also finds the current manifest: an archival becomes visible atomically when its pointer is created,
and a crash before that leaves files no manifest names (removed by the next archival). Readers take
the newest pointer, and a reader that still hits a vanished file reloads and retries.

Retention: the newest KEPT_VERSIONS pointers are kept with their manifests and every history file
those manifests name, so if the newest manifest is damaged, `weir table repair` can fall back to an
older version and reactivate the instants archived since from the files the newer versions wrote.
Older pointers, manifests and the files only they name are deleted by the next archival.
"""

from __future__ import annotations

import io
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakecore.errors import CorruptMetadata, HistoryMoved
from lakecore.storage import Storage
from lakecore.timeline.checkpoint import (
    FILE_SCHEMA,
    SLICES,
    RowGroup,
    checkpoint_of,
    cuts,
    describe,
    fold,
    index_metadata,
    index_of,
)
from lakecore.timeline.history import (
    HISTORY_DIR,
    LIVE_SCHEMA,
    POINTER_PREFIX,
    ROW_SCHEMA,
    TIMELINE_DIR,
    Archived,
    HistoryFile,
    Manifest,
    files_of,
)

QUERY_COLUMNS = ["requested_time", "completion_time", "action", "files", "deleted"]
KEPT_VERSIONS = 3  # history versions (pointer + manifest + files) kept for falling back

WHOLE, FOOTER = -1, "#footer"

_lock = threading.Lock()
_summaries: dict[str, tuple[int, Archived]] = {}   # per table: the newest version loaded
# (table, history file, column, row group or WHOLE) -> (the decoded column, its size); column "": the
# file's bytes, FOOTER: its parsed footer and row-group index
_tables: OrderedDict[tuple[str, str, str, int], tuple[Any, int]] = OrderedDict()
_TABLE_BYTES = 256 << 20  # history files kept (decoded columns and bytes), least recently used evicted first
_cached_bytes = 0
T = TypeVar("T")


def pointer_version(names: Sequence[str]) -> int:
    """The current manifest version named by the pointer files among timeline file names (0: none)."""
    best = 0
    for n in names:
        if n.startswith(POINTER_PREFIX) and n[len(POINTER_PREFIX):].isdigit():
            best = max(best, int(n[len(POINTER_PREFIX):]))
    return best


def pointer_name(version: int) -> str:
    return f"{POINTER_PREFIX}{version:012d}"


def manifest_path(version: int) -> str:
    return f"{HISTORY_DIR}/manifest-{version:012d}.json"


class HistoryStore:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    # -- reading ---------------------------------------------------------------------------------

    def current_version(self) -> int:
        return pointer_version(self.storage.list_names(TIMELINE_DIR))

    def manifest(self, version: int | None = None) -> Manifest:
        v = self.current_version() if version is None else version
        if v == 0:
            return Manifest()
        return self.summary(v).manifest

    def summary(self, version: int) -> Archived:
        """The manifest of a version, with its live files read when first asked for (cached: they never
        change)."""
        if version == 0:
            return Archived()
        uri = self.storage.uri
        with _lock:
            hit = _summaries.get(uri)
        if hit is not None and hit[0] == version:
            return hit[1]
        path = manifest_path(version)
        try:
            data = self.storage.read(path)
        except FileNotFoundError:
            raise HistoryMoved(path) from None
        manifest = Manifest.loads(data, source=path, table=uri)
        out = Archived(manifest, read_live=lambda: self._live_of(manifest))
        with _lock:
            if uri not in _summaries or _summaries[uri][0] < version:
                _summaries[uri] = (version, out)
        return out

    def _live_of(self, manifest: Manifest) -> pa.Table:
        return self._read(manifest.live, None) if manifest.live else LIVE_SCHEMA.empty_table()

    def rows(self, manifest: Manifest, columns: Sequence[str] = QUERY_COLUMNS, *,
             keep: Callable[[HistoryFile], bool] = lambda f: True,
             groups: Callable[[RowGroup], bool] | None = None) -> pa.Table:
        """History rows of the manifest's files that `keep` selects, sorted by completion time; of files
        written with checkpoints, only the row groups `groups` selects (when given)."""
        chosen = sorted((f for f in manifest.files if keep(f)), key=lambda f: f.min_completion)
        parts = []
        for f in chosen:
            index = self.index(f.name) if groups is not None else None
            if groups is None or index is None:
                parts.append(self._read(f.name, tuple(columns)))
            else:
                parts += [self._read(f.name, tuple(columns), i) for i, g in enumerate(index) if groups(g)]
        if not parts:
            return ROW_SCHEMA.empty_table().select(list(columns))
        return pa.concat_tables(parts)

    def slices_as_of(self, manifest: Manifest, bound: str) -> pa.Table:
        """The latest slice of every file group as of `bound` (LIVE_SCHEMA): latest_slices of the files
        of every archived instant completed at or before it, folded from the newest checkpoint at or
        before it and the instants after that (all of them in files written without checkpoints)."""
        columns = ("requested_time", "completion_time", "files")
        tail: list[pa.Table] = []  # newest first
        before = LIVE_SCHEMA.empty_table()
        for f in sorted((f for f in manifest.files if f.min_completion <= bound),
                        key=lambda f: f.min_completion, reverse=True):
            index = self.index(f.name)
            if index is None:
                tail.append(self._read(f.name, columns))
                continue
            last = max((i for i, g in enumerate(index) if g.min_completion <= bound), default=-1)
            if last >= 0 and index[last].max_completion > bound:
                tail.append(self._read(f.name, columns, last))
                last -= 1
            if last >= 0:
                before = checkpoint_of(self._read(f.name, (SLICES,), last))
                break
        rows = pa.concat_tables(tail[::-1]) if tail else ROW_SCHEMA.empty_table().select(list(columns))
        rows = rows.filter(pc.less_equal(rows.column("completion_time"), bound))
        return fold(before, files_of(rows))

    def read_file(self, name: str, columns: Sequence[str]) -> pa.Table:
        """Columns of one history file by name (also one no manifest names: repair reads those)."""
        return self._read(name, tuple(columns))

    def index(self, name: str) -> tuple[RowGroup, ...] | None:
        """The row groups of a history file written with checkpoints (None: written before them)."""
        return self._footer(name)[1]

    def _bytes(self, name: str) -> bytes:
        """A history file's bytes, read from storage once while cached."""
        key = (self.storage.uri, name, "", WHOLE)
        with _lock:
            data = _touch(key)
        if data is None:
            path = f"{HISTORY_DIR}/{name}"
            try:
                data = self.storage.read(path)
            except FileNotFoundError:
                raise HistoryMoved(path) from None
            with _lock:
                _keep(key, data, len(data))
        return data

    def _footer(self, name: str) -> tuple[pq.FileMetaData, tuple[RowGroup, ...] | None]:
        key = (self.storage.uri, name, FOOTER, WHOLE)
        with _lock:
            hit: tuple[pq.FileMetaData, tuple[RowGroup, ...] | None] | None = _touch(key)
        if hit is None:
            with _decoding(name):
                meta = pq.read_metadata(pa.BufferReader(self._bytes(name)))
                hit = (meta, index_of(meta.metadata))
            with _lock:
                _keep(key, hit, meta.serialized_size)
        return hit

    def _read(self, name: str, columns: tuple[str, ...] | None, group: int = WHOLE) -> pa.Table:
        """Columns of a history file (all when None) or of one of its row groups, each decoded once and
        cached, and the file read from storage once while it is cached: an as-of read resolves its
        point, builds its view and checks for cleaned files with three column sets of the same files."""
        uri = self.storage.uri
        names = list(columns) if columns is not None else ROW_SCHEMA.names
        with _lock:
            hit = {c: _touch((uri, name, c, group)) for c in names}
        missing = [c for c in names if hit[c] is None]
        if missing:
            data = self._bytes(name)
            with _decoding(name):
                if group == WHOLE:
                    table = pq.read_table(pa.BufferReader(data),
                                          columns=missing if columns is not None else None)
                else:
                    table = pq.ParquetFile(pa.BufferReader(data), metadata=self._footer(name)[0]
                                           ).read_row_group(group, columns=missing)
            if columns is None:
                names = table.column_names
            with _lock:
                for c in table.column_names:
                    hit[c] = table.column(c)
                    _keep((uri, name, c, group), table.column(c), table.column(c).nbytes)
        return pa.Table.from_arrays([hit[c] for c in names], names=names)

    def retrying(self, query: Callable[[Manifest], T]) -> T:
        """Run a query against the current manifest; if an LSM merge removed a file meanwhile, reload
        the manifest and run it again (a merge keeps what it removes readable through the new files)."""
        for attempt in range(3):
            try:
                return query(self.manifest())
            except HistoryMoved:
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    # -- writing (archival only, under the table lock) ------------------------------------------

    def write_rows(self, level: int, rows: pa.Table) -> HistoryFile:
        """A history file of the rows: with checkpoints, in row groups ending at them, when the rows
        carry the `slices` column (checkpoint.with_checkpoints); as written before checkpoints when not."""
        rows = rows.sort_by("completion_time")
        info = HistoryFile.describe("", level, rows)
        name = f"L{level}-{info.min_completion}-{info.max_completion}-{uuid.uuid4().hex[:8]}.parquet"
        data = _checkpointed(rows) if SLICES in rows.column_names else _parquet(rows.cast(ROW_SCHEMA))
        self.storage.write_if_absent(f"{HISTORY_DIR}/{name}", data)
        return HistoryFile.describe(name, level, rows)

    def write_live(self, version: int, files: pa.Table) -> str:
        name = f"live-{version:012d}-{uuid.uuid4().hex[:8]}.parquet"
        self.storage.write_if_absent(f"{HISTORY_DIR}/{name}", _parquet(files.cast(LIVE_SCHEMA)))
        return name

    def commit(self, manifest: Manifest) -> None:
        """Write the manifest, then the pointer that makes it current."""
        self.storage.write_if_absent(manifest_path(manifest.version), manifest.dumps())
        self.storage.write_if_absent(f"{TIMELINE_DIR}/{pointer_name(manifest.version)}", b"")

    def next_version(self) -> int:
        """A version no manifest has used (a crashed archival may have left one unpointed-at)."""
        used = [int(n[len("manifest-"):-len(".json")]) for n in self.storage.list_names(HISTORY_DIR)
                if n.startswith("manifest-") and n.endswith(".json") and n[9:-5].isdigit()]
        return max([self.current_version(), *used]) + 1

    def pointer_versions(self) -> list[int]:
        """Versions with a pointer file, oldest first."""
        names = self.storage.list_names(TIMELINE_DIR)
        return sorted(int(n[len(POINTER_PREFIX):]) for n in names
                      if n.startswith(POINTER_PREFIX) and n[len(POINTER_PREFIX):].isdigit())

    def collect_garbage(self, current: Manifest, previous: int) -> list[str]:
        """Keep the newest KEPT_VERSIONS versions (pointers, manifests and the files they name; the
        current one and `previous`, the one the archival started from, always); delete the rest and
        leftovers of crashed archivals. A kept manifest that does not parse keeps nothing beyond its
        own file: the files it named are the current version's or a newer kept one's too, or lost."""
        kept_versions = [v for v in self.pointer_versions() if v <= current.version][-KEPT_VERSIONS:]
        kept_versions = sorted({*kept_versions, current.version, *([previous] if previous > 0 else [])})
        keep = _names(current)
        for v in kept_versions:
            keep.add(manifest_path(v).rsplit("/", 1)[1])
            if v == current.version:
                continue
            try:
                keep |= _names(Manifest.loads(self.storage.read(manifest_path(v)), source=manifest_path(v)))
            except (FileNotFoundError, CorruptMetadata):
                continue  # nothing more to keep for it: repair falls back past it
        deleted = []
        for n in self.storage.list_names(HISTORY_DIR):
            if n not in keep:
                self.storage.delete(f"{HISTORY_DIR}/{n}")
                deleted.append(n)
        for v in self.pointer_versions():
            if v not in kept_versions:
                self.storage.delete(f"{TIMELINE_DIR}/{pointer_name(v)}")
        return deleted


def _names(m: Manifest) -> set[str]:
    return {f.name for f in m.files} | ({m.live} if m.live else set())


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def _checkpointed(rows: pa.Table) -> bytes:
    """A history file with checkpoints: one row group per checkpoint, the index in the footer."""
    groups = cuts(rows)
    schema = FILE_SCHEMA.with_metadata(index_metadata(describe(rows, groups)))
    rows = rows.select(schema.names).cast(schema)
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, schema, compression="zstd") as writer:
        for start, end in groups:
            writer.write_table(rows.slice(start, end - start), row_group_size=end - start)
    return buf.getvalue()


@contextmanager
def _decoding(name: str) -> Iterator[None]:
    try:
        yield
    except (pa.ArrowInvalid, OSError, ValueError, TypeError, IndexError) as exc:  # also a bad footer index
        path = f"{HISTORY_DIR}/{name}"
        raise CorruptMetadata(f"history file {path} is truncated or corrupted ({exc}); restore it "
                              "from a backup: the instants it archived cannot be read without "
                              "it") from exc


def _touch(key: tuple[str, str, str, int]) -> Any:
    """A cached entry, marked as just used (hold _lock)."""
    hit = _tables.get(key)
    if hit is not None:
        _tables.move_to_end(key)
        return hit[0]
    return None


def _keep(key: tuple[str, str, str, int], value: Any, size: int) -> None:
    """Cache an entry, evicting the least recently used beyond the budget (hold _lock)."""
    global _cached_bytes
    if key not in _tables:
        _tables[key] = (value, size)
        _cached_bytes += size
    while _cached_bytes > _TABLE_BYTES and len(_tables) > 1:
        _, (_, old) = _tables.popitem(last=False)
        _cached_bytes -= old


def decoded(uri: str) -> list[tuple[str, str, int]]:
    """What the cache holds decoded for a table: (history file, column, row group or -1: whole file)."""
    with _lock:
        return [(name, c, g) for (u, name, c, g) in _tables if u == uri and c not in ("", FOOTER)]


def clear_history_cache() -> None:
    global _cached_bytes
    with _lock:
        _summaries.clear()
        _tables.clear()
        _cached_bytes = 0


def completion_of(rows: pa.Table, requested_time: str) -> str | None:
    """The completion time of the row with this requested time (None if absent)."""
    mask = pc.equal(rows.column("requested_time"), requested_time)
    hit = rows.column("completion_time").filter(mask)
    return hit[0].as_py() if len(hit) else None
