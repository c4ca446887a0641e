"""`Table`: the public face of lakecore. Create/open a table, write, read, inspect.

A facade only: it wires storage, config, lock, timeline, routing, file writers and readers together
and holds no format logic of its own. Writes run the same split the Spark jobs use (driver opens the
instant, tasks write file groups and return write stats, driver commits), here with a thread pool.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.concurrency import Lock, StorageLock, begin_write, commit_write, rollback_write, view_of
from lakecore.config import (
    COMMIT_TIME,
    META_COLUMNS,
    OP,
    ColumnGroup,
    MergeMode,
    TableConfig,
    TableType,
    default_merge_mode,
    normalize_groups,
)
from lakecore.errors import (
    AlreadyExists,
    InvalidInstantState,
    TableAlreadyExists,
    TableNotFound,
)
from lakecore.read.slices import merge_columns, read_slice
from lakecore.read.spec import file_schema
from lakecore.read.snapshot import changes_view, check_columns, finish, read_view
from lakecore.storage import Storage, open_storage
from lakecore.timeline import Instant, Timeline, TimelineStore, WriteStat, parse_point_in_time
from lakecore.write import Operation, conform, route, write_file_group

CONFIG_PATH = ".weir/table.json"
QueryType = Literal["snapshot", "read_optimized"]
_tasks = ThreadPoolExecutor(max_workers=2, thread_name_prefix="weir-task")


@dataclass(frozen=True)
class WriteResult:
    instant: Instant
    stats: tuple[WriteStat, ...]

    @property
    def records(self) -> int:
        return sum(s.records for s in self.stats)

    @property
    def file_groups(self) -> int:
        return len(self.stats)


class Table:
    """A lake table at a URI. Obtain one with `Table.create(...)` or `Table.open(uri)`."""

    def __init__(self, storage: Storage, config: TableConfig, *, lock: Lock | None = None) -> None:
        self.storage = storage
        self.config = config
        self.lock: Lock = lock if lock is not None else StorageLock(storage)
        self._store = TimelineStore(storage)

    # -- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def create(cls, uri: str, *, schema: pa.Schema, record_key: str | Sequence[str],
               partition_fields: Sequence[str] = (), table_type: TableType = "merge_on_read",
               ordering_field: str | None = None, merge_mode: MergeMode | None = None,
               column_groups: Sequence[ColumnGroup | Mapping[str, Any]] = (),
               column_defaults: Mapping[str, Any] | None = None, buckets: int = 4,
               compression: str = "zstd", name: str | None = None,
               storage_options: dict[str, Any] | None = None, lock: Lock | None = None) -> Table:
        """Create a new, empty table at `uri` (fails if one exists there)."""
        groups = normalize_groups([g if isinstance(g, ColumnGroup) else ColumnGroup.from_json(g)
                                   for g in column_groups])
        config = TableConfig(
            name=name or _name_from_uri(uri), schema=schema,
            record_key=(record_key,) if isinstance(record_key, str) else tuple(record_key),
            partition_fields=tuple(partition_fields), table_type=table_type,
            ordering_field=ordering_field,
            merge_mode=merge_mode or default_merge_mode(ordering_field, groups),
            column_groups=groups, column_defaults=dict(column_defaults or {}), buckets=buckets,
            compression=compression)
        storage = open_storage(uri, storage_options)
        try:
            storage.write_if_absent(CONFIG_PATH, config.dumps())
        except AlreadyExists:
            raise TableAlreadyExists(f"a table already exists at {uri}; open it with Table.open, "
                                     "or choose another location") from None
        return cls(storage, config, lock=lock)

    @classmethod
    def open(cls, uri: str, *, storage_options: dict[str, Any] | None = None,
             lock: Lock | None = None) -> Table:
        storage = open_storage(uri, storage_options)
        try:
            raw = storage.read(CONFIG_PATH)
        except (FileNotFoundError, NotADirectoryError):
            raise TableNotFound(f"no table at {uri} (no {CONFIG_PATH}); check the URI, or create one "
                                "with `weir table create`") from None
        return cls(storage, TableConfig.loads(raw, source=f"{uri}/{CONFIG_PATH}"), lock=lock)

    @property
    def uri(self) -> str:
        return self.storage.uri

    @property
    def schema(self) -> pa.Schema:
        return self.config.schema

    # -- writes -------------------------------------------------------------------------------

    def upsert(self, data: Any) -> WriteResult:
        """Insert new keys and update existing ones (per the table's merge mode)."""
        return self.write(data, "upsert")

    def insert(self, data: Any) -> WriteResult:
        """Write records expected to be new; an existing key is still merged, never duplicated."""
        return self.write(data, "insert")

    def bulk_insert(self, data: Any) -> WriteResult:
        """Fast initial load: empty file groups get base files directly (no log, no merge)."""
        return self.write(data, "bulk_insert")

    def delete(self, keys: Any) -> WriteResult:
        """Delete by record key (plus partition fields; plus the ordering field for event-time
        ordering, where a delete older than the live row is ignored)."""
        return self.write(keys, "delete")

    def write(self, data: Any, operation: Operation) -> WriteResult:
        conformed = conform(data, self.config, operation)  # bad input fails here, before any instant
        groups = route(conformed.rows, self.config)
        need_view = self.config.table_type == "copy_on_write" or operation == "bulk_insert"
        txn = begin_write(self.storage, self.config, self.lock, operation, need_view=need_view)
        try:
            ctx = txn.context()
            if len(groups) > 1:
                stats = list(_tasks.map(lambda g: write_file_group(ctx, g), groups))
            else:
                stats = [write_file_group(ctx, g) for g in groups]
            done = commit_write(txn, stats, lock=self.lock)
        except BaseException:
            self._abandon(txn.instant)
            raise
        return WriteResult(done, tuple(stats))

    def _abandon(self, instant: Instant) -> None:
        try:
            rollback_write(self.storage, self.lock, instant)
        except Exception:  # noqa: BLE001 - the original error matters more; the instant stays pending
            pass

    def rollback(self, instant_time: str) -> Instant:
        """Roll back a pending (requested/inflight) write instant, deleting its files."""
        instant = self.timeline().get(instant_time)
        if instant.is_completed:
            raise InvalidInstantState(f"instant {instant_time} is completed; only pending writes can be "
                                      "rolled back for now")
        return rollback_write(self.storage, self.lock, instant)

    # -- reads --------------------------------------------------------------------------------

    def timeline(self) -> Timeline:
        return self._store.load()

    def read(self, *, as_of: str | datetime | None = None, columns: Sequence[str] | None = None,
             partitions: Mapping[str, Any] | None = None, filter: pc.Expression | None = None,
             with_meta: bool = False, query: QueryType = "snapshot") -> pa.Table:
        """The table's rows: latest (snapshot), as of a past instant or time, or base files only."""
        timeline = self.timeline()
        if as_of is not None:
            timeline = timeline.as_of(parse_point_in_time(as_of))
        view = view_of(self.storage, timeline)
        return read_view(self.storage, self.config, view, columns=columns, partitions=partitions,
                         filter=filter, with_meta=with_meta, base_only=query == "read_optimized")

    def read_changes(self, start: str | datetime, end: str | datetime | None = None, *,
                     columns: Sequence[str] | None = None) -> pa.Table:
        """Records changed by instants completed in (start, end]: their latest version as of `end`,
        with `_weir_op` = 'upsert' or 'delete' and the meta columns."""
        check_columns(self.config, columns)
        timeline = self.timeline()
        lo = timeline.resolve_point(parse_point_in_time(start))
        last = timeline.last_completed()
        hi = timeline.resolve_point(parse_point_in_time(end)) if end is not None else \
            (last.completion_time if last and last.completion_time else lo)
        writes = [i for i in timeline.completed_between(lo, hi)
                  if i.action in ("commit", "deltacommit")]
        touched = set().union(*(self._store.metadata(i).file_groups for i in writes)) if writes else set()
        times = pa.array([int(i.requested_time) for i in writes], pa.int64())
        view = view_of(self.storage, timeline.as_of(hi))
        wanted = merge_columns(self.config, None)
        parts = []
        for fs in view.slices:
            if (fs.partition, fs.file_id) in touched:
                t = read_slice(self.storage, self.config, fs, wanted, keep_deletes=True)
                parts.append(t.filter(pc.is_in(t.column(COMMIT_TIME), value_set=times)))
        fields = file_schema(self.config)
        schema = pa.schema([*[fields.field(c) for c in wanted], pa.field(OP, pa.int8())])
        table = pa.concat_tables(parts) if parts else schema.empty_table()
        table = changes_view(table)
        out = finish(table, self.config, columns=None, filter=None, with_meta=True)
        out = out.append_column(OP, table.column(OP))
        if columns is not None:
            out = out.select([*[c for c in META_COLUMNS if c not in columns], OP, *columns])
        return out

    # -- inspection ---------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        timeline = self.timeline()
        view = view_of(self.storage, timeline)
        files = [f for s in view.slices for f in s.files]
        last = timeline.last_completed()
        return {
            "uri": self.uri,
            "config": self.config.to_json(),
            "instants": {"total": len(timeline), "completed": len(timeline.completed),
                         "pending": [str(i) for i in timeline.pending],
                         "last_completed": str(last) if last else None},
            "partitions": len(view.partitions()),
            "file_groups": len(view.slices),
            "files": len(files),
            "bytes": sum(f.bytes for f in files),
        }

    def __repr__(self) -> str:
        return f"Table({self.config.name!r} at {self.uri!r}, {self.config.table_type})"


def _name_from_uri(uri: str) -> str:
    tail = uri.rstrip("/").rsplit("/", 1)[-1] or "table"
    cleaned = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in tail).lstrip("_.-")
    return cleaned[:128] or "table"

