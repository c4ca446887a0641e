"""`Table`: the public face of lakecore. Create/open a table, write, read, inspect.

A facade only: it wires storage, config, lock, timeline, routing, file writers and readers together
and holds no format logic of its own. Writes run the same split the Spark jobs use (driver opens the
instant, tasks write file groups and return write stats, driver commits), here with a thread pool.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.concurrency import (
    Lock,
    TableLock,
    check_lock,
    ensure_held,
    lock_for_spec,
    spec_of,
    view_of,
)
from lakecore.concurrency.activity import activity
from lakecore.config import (
    CONFIG_PATH,
    DEFAULT_CODEC,
    ColumnGroup,
    ConcurrencyMode,
    LockSpec,
    MergeMode,
    TableConfig,
    TableType,
    case_twins,
    default_merge_mode,
    did_you_mean,
    normalize_groups,
    schema_from_json,
    schema_of,
    settable_codec,
)
from lakecore.errors import (
    AlreadyExists,
    InvalidInput,
    InvalidTableConfig,
    LockUnavailable,
    TableAlreadyExists,
    TableNotFound,
)
from lakecore.publish import CatalogRef, PublishResult, publish
from lakecore.read.changes import read_changes
from lakecore.read.conditions import conditions_filter
from lakecore.read.scan import Scan, plan_scan
from lakecore.services import (
    ArchivalPlan,
    ArchivalPolicy,
    ArchivalResult,
    CleanPlan,
    CleanPolicy,
    ClusteringPlan,
    ClusteringStrategy,
    CompactionPlan,
    CompactionStrategy,
    Savepoint,
    UndoPlan,
    check_readable,
    refuse_live,
)
from lakecore.storage import OptionsRef, Storage, open_storage
from lakecore.table.maintenance import Maintenance, MaintenanceResult
from lakecore.table.options import WriterOptions
from lakecore.table.writer import WriteResult, write_groups
from lakecore.timeline import (
    TIMELINE_DIR,
    CommitMetadata,
    Instant,
    Timeline,
    TimelineStore,
    now_ms,
    parse_point_in_time,
    requested_time_of,
)
from lakecore.write import (
    Operation,
    WriteInput,
    as_table,
    check_operation,
    combine_and_route,
    conform,
    evolved_schema,
)

QueryType = Literal["snapshot", "read_optimized"]
# a pyarrow.compute expression, or conditions as text: "amount > 100", ["a = 1", "b is null"]
Filter: TypeAlias = "pc.Expression | str | Sequence[str]"


class Table:
    """A lake table at a URI. Obtain one with `Table.create(...)` or `Table.open(uri)`."""

    def __init__(self, storage: Storage, config: TableConfig, *, lock: Lock | LockSpec | None = None,
                 options: WriterOptions | None = None) -> None:
        self.storage = storage
        self.config = config
        self.lock: Lock = _table_lock(storage, config.lock, lock, self._recorded_lock)
        self.options = options or WriterOptions()
        self._store = TimelineStore(storage)

    def _recorded_lock(self) -> LockSpec:
        """table.json's lock, read after each acquire of the table lock; its codec and tombstone retention
        are taken up on the way (a change by set_compression or set_tombstone_retention reaches a handle
        opened before at its next commit, for free)."""
        recorded = _read_config(self.storage)
        if (recorded.compression, recorded.tombstone_retention_hours) != \
                (self.config.compression, self.config.tombstone_retention_hours):
            self.config = replace(self.config, compression=recorded.compression,
                                  tombstone_retention_hours=recorded.tombstone_retention_hours)
        return recorded.lock

    # -- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def create(cls, uri: str, *, schema: pa.Schema | Mapping[str, pa.DataType | str],
               record_key: str | Sequence[str], partition_fields: str | Sequence[str] = (),
               table_type: TableType = "merge_on_read",
               ordering_field: str | None = None, merge_mode: MergeMode | None = None,
               column_groups: Sequence[ColumnGroup | Mapping[str, Any]] = (),
               column_defaults: Mapping[str, Any] | None = None, buckets: int = 4,
               compression: str = DEFAULT_CODEC, concurrency_mode: ConcurrencyMode = "optimistic",
               tombstone_retention_hours: float | None = None, name: str | None = None,
               storage_options: dict[str, Any] | OptionsRef | None = None,
               lock: Lock | LockSpec | None = None,
               options: WriterOptions | None = None) -> Table:
        """Create a new, empty table at `uri` (fails if one exists there). `schema`: a pyarrow schema, or
        a mapping of column names to types (pyarrow's, or a LakeTable's names: "int64", "string",
        "timestamp_us", "decimal128(10,2)"). table.json records the provider of `lock` (a lock or a
        LockSpec; default: the storage lock) for every writer to take. `compression`: the Parquet codec
        of its data files, one of lakecore.config.CODECS."""
        table_name = name or _name_from_uri(uri)
        codec = settable_codec(compression, table_name)   # refused before anything is made
        schema = schema_of(schema)
        if isinstance(partition_fields, str):   # one field named, not a sequence of its letters
            partition_fields = (partition_fields,)
        storage = open_storage(uri, storage_options)
        groups = normalize_groups([g if isinstance(g, ColumnGroup) else ColumnGroup.from_json(g)
                                   for g in column_groups])
        config = TableConfig(
            name=table_name, schema=schema,
            record_key=(record_key,) if isinstance(record_key, str) else tuple(record_key),
            partition_fields=tuple(partition_fields), table_type=table_type,
            ordering_field=ordering_field,
            merge_mode=merge_mode or default_merge_mode(ordering_field, groups),
            column_groups=groups, column_defaults=dict(column_defaults or {}), buckets=buckets,
            compression=codec, concurrency_mode=concurrency_mode,
            tombstone_retention_hours=tombstone_retention_hours, lock=_spec_to_record(lock, storage.uri))
        return cls._create(uri, storage, config, lock=lock, options=options)

    @classmethod
    def create_from_config(cls, uri: str, config: TableConfig, *,
                           storage_options: dict[str, Any] | OptionsRef | None = None,
                           options: WriterOptions | None = None) -> Table:
        """Create a new, empty table at `uri` from a whole `TableConfig` (validated when it was made): what
        `create` records for the same values, column groups normalized and a ZooKeeper lock without a
        path given the table's default one. Its lock is the one `config.lock` names."""
        settable_codec(config.compression, config.name)
        storage = open_storage(uri, storage_options)
        config = replace(config, column_groups=normalize_groups(config.column_groups),
                         lock=_spec_to_record(config.lock, storage.uri))
        return cls._create(uri, storage, config, lock=None, options=options)

    @classmethod
    def _create(cls, uri: str, storage: Storage, config: TableConfig, *, lock: Lock | LockSpec | None,
                options: WriterOptions | None) -> Table:
        if (why := case_twins([], config.schema.names)) is not None:   # a new table only: old ones still open
            raise InvalidTableConfig(f"table {config.name!r}: {why}")
        if storage.list_names(TIMELINE_DIR) and not storage.exists(CONFIG_PATH):
            raise TableAlreadyExists(
                f"{uri} holds a table's timeline but no {CONFIG_PATH} (it was lost): creating a new table "
                f"there would mix two tables' data; recreate the config from the timeline with `weir table "
                f"repair {uri} --run`, or choose another location")
        try:
            storage.write_if_absent(CONFIG_PATH, config.dumps())
        except AlreadyExists:
            raise TableAlreadyExists(f"a table already exists at {uri}; write to it as it is (Table.open; "
                                     f"`weir table describe {uri}` shows its schema), or choose another "
                                     "location") from None
        return cls(storage, config, lock=lock, options=options)

    @classmethod
    def open(cls, uri: str, *, storage_options: dict[str, Any] | OptionsRef | None = None,
             lock: Lock | LockSpec | None = None, options: WriterOptions | None = None) -> Table:
        """Open the table at `uri` with the lock its table.json records. An explicit `lock` (a lock, or a
        LockSpec whose ZooKeeper path may be left out) must be that lock: else LockProviderMismatch."""
        storage = open_storage(uri, storage_options)
        return cls(storage, _current_config(storage), lock=lock, options=options)

    def add_columns(self, columns: pa.Schema | Sequence[pa.Field], *, groups: Mapping[str, str] | None = None,
                    timeout: float | None = None) -> pa.Schema:
        """Add nullable columns to the table without a write (rows written before read them as null). On a
        column-group table `groups` names each new column's group (column -> group name): it joins that
        group, whose writers carry it from then on; a column never changes group. A column the table has
        with the same type is left as it is. Recorded in table.json under the table lock; writers that
        opened the table before see the columns when they open it again. Returns the table's schema."""
        fields = list(columns)
        self.lock.acquire(timeout)
        try:
            current = _current_config(self.storage)
            evolved = current.with_added_columns(fields, dict(groups or {}))
            if evolved != current:
                ensure_held(self.lock, "adding columns to table.json")
                self.storage.write(CONFIG_PATH, evolved.dumps())
        finally:
            self.lock.release()
        self.config = evolved
        return evolved.schema

    def set_lock_provider(self, lock: Lock | LockSpec, *, timeout: float | None = None,
                          unreachable_ok: bool = False) -> LockSpec:
        """Record another lock provider in table.json, holding the table's current lock and the new one,
        so no critical section runs under either meanwhile. Writers that opened the table before stop at
        their next critical section (LockProviderChanged) and must open it again. Returns the new spec.

        `unreachable_ok`: when the current lock cannot be reached (LockUnavailable: a ZooKeeper gone for
        good), change it holding the new lock only, unless a pending write's writer is alive (WriterLive).
        Sound only if no writer can reach the old lock any more: one that still could would commit under
        it while others commit under the new one."""
        new = _spec_to_record(lock, self.uri)
        new_lock = lock_for_spec(self.storage, new) if isinstance(lock, LockSpec) else lock
        try:
            self.lock.acquire(timeout)
        except LockUnavailable as exc:
            if not unreachable_ok:
                raise LockUnavailable(
                    f"{exc}. To move the table off a lock that is gone for good: stop every writer of the "
                    f"table, then `weir table set-lock {self.uri} --lock-provider storage --old-lock-gone` "
                    "(Table.set_lock_provider(..., unreachable_ok=True))") from exc
            return self._set_lock_without_the_old(new, new_lock, None if isinstance(lock, LockSpec) else lock,
                                                  timeout)
        try:
            recorded = _read_config(self.storage)
            if recorded.lock != new:
                new_lock.acquire(timeout)
                try:
                    self.storage.write(CONFIG_PATH, recorded.with_lock(new).dumps())
                finally:
                    new_lock.release()
        finally:
            self.lock.release()
        self.config = self.config.with_lock(new)
        self.lock = _table_lock(self.storage, new, None if isinstance(lock, LockSpec) else lock,
                                self._recorded_lock)
        return new

    def _set_lock_without_the_old(self, new: LockSpec, new_lock: Lock, given: Lock | None,
                                  timeout: float | None) -> LockSpec:
        new_lock.acquire(timeout)
        try:
            timeline = self._store.load()
            refuse_live(self.storage, self._store, timeline, self.options.heartbeat, now_ms(),
                        "changing the lock without the old one")
            recorded = _read_config(self.storage)
            if recorded.lock != new:
                self.storage.write(CONFIG_PATH, recorded.with_lock(new).dumps())
        finally:
            new_lock.release()
        self.config = self.config.with_lock(new)
        self.lock = _table_lock(self.storage, new, given, self._recorded_lock)
        return new

    def set_compression(self, codec: str, *, timeout: float | None = None) -> str:
        """Record another Parquet codec (one of lakecore.config.CODECS) in table.json, under the table lock
        as every change of table.json is made. Files written from then on use it, those written before
        keep theirs (each file names its codec; readers read both). Writers that opened the table before
        take it up at their next commit, so their following write uses it. Returns the codec."""
        wanted = settable_codec(codec, self.config.name)
        self._rewrite_config("compression", lambda c: c.with_compression(wanted), timeout)
        return wanted

    def set_tombstone_retention(self, hours: float | None, *, timeout: float | None = None) -> float | None:
        """Record how many hours a delete's tombstone is kept in rewritten base files (None: kept for
        ever), in table.json under the table lock. Rewrites from then on purge by it; a tombstone purged
        before stays purged. Writers that opened the table before take it up at their next commit."""
        # replace validates (hours >= 0)
        self._rewrite_config("tombstone retention", lambda c: replace(c, tombstone_retention_hours=hours),
                             timeout)
        return hours

    def _rewrite_config(self, what: str, change: Callable[[TableConfig], TableConfig],
                        timeout: float | None) -> None:
        """table.json with `change` made, under the table lock as every change of it is made (not written
        when it holds the change already); this handle's config changed alike."""
        self.lock.acquire(timeout)
        try:
            recorded = _read_config(self.storage)
            changed = change(recorded)
            if changed != recorded:
                ensure_held(self.lock, f"changing the table's {what} in table.json")
                self.storage.write(CONFIG_PATH, changed.dumps())
        finally:
            self.lock.release()
        self.config = change(self.config)

    @property
    def uri(self) -> str:
        return self.storage.uri

    @property
    def schema(self) -> pa.Schema:
        return self.config.schema

    # -- writes -------------------------------------------------------------------------------

    def upsert(self, data: WriteInput, *, extra: Mapping[str, Any] | None = None) -> WriteResult:
        """Insert new keys and update existing ones (per the table's merge mode)."""
        return self.write(data, "upsert", extra=extra)

    def insert(self, data: WriteInput, *, extra: Mapping[str, Any] | None = None) -> WriteResult:
        """Write records expected to be new; an existing key is still merged, never duplicated."""
        return self.write(data, "insert", extra=extra)

    def bulk_insert(self, data: WriteInput, *, extra: Mapping[str, Any] | None = None) -> WriteResult:
        """Fast initial load: empty file groups get base files directly (no log, no merge)."""
        return self.write(data, "bulk_insert", extra=extra)

    def delete(self, keys: WriteInput, *, extra: Mapping[str, Any] | None = None) -> WriteResult:
        """Delete by record key (plus partition fields; plus the ordering field for event-time
        ordering, where a delete older than the live row is ignored)."""
        return self.write(keys, "delete", extra=extra)

    def insert_overwrite(self, data: WriteInput, *, extra: Mapping[str, Any] | None = None) -> WriteResult:
        """Replace the partitions the input touches with the input's rows (others stay as they are),
        atomically: one replacecommit; readers see the old partitions or the new, never a mix."""
        return self.write(data, "insert_overwrite", extra=extra)

    def insert_overwrite_table(self, data: WriteInput, *,
                               extra: Mapping[str, Any] | None = None) -> WriteResult:
        """Replace the whole table with the input's rows (an empty input empties it), atomically."""
        return self.write(data, "insert_overwrite_table", extra=extra)

    def write(self, data: WriteInput, operation: Operation, *,
              extra: Mapping[str, Any] | None = None) -> WriteResult:
        """Run one write. `data` is a pyarrow Table or RecordBatch, a pandas DataFrame or anything that
        exports an Arrow stream (else InvalidInput). `operation` is one of lakecore.write.OPERATIONS
        (anything else raises UnknownOperation before an instant exists). `extra` is stored in the
        commit metadata (e.g. source offsets)."""
        operation = check_operation(operation)
        table = as_table(data)
        config = self.config
        if self.options.files.evolve_schema and operation != "delete":
            evolved = evolved_schema(table, config)
            config = config.with_schema(evolved) if evolved is not None else config
        conformed = conform(table, config, operation)  # bad input fails here, before any instant
        groups = combine_and_route(conformed.rows, config, operation)
        result = write_groups(self.storage, config, self.lock, operation, groups, self.options, extra,
                              table_schema=self.config.schema)
        committed = self._store.metadata(result.instant).schema
        if committed:
            schema = schema_from_json(committed)
            # a column-group table that gained columns meanwhile: their groups are in table.json
            stale = self.config.column_groups and not set(schema.names) <= set(self.config.schema.names)
            self.config = (_read_config(self.storage) if stale else self.config).with_committed_schema(schema)
        return result

    # -- maintenance --------------------------------------------------------------------------

    @property
    def maintenance(self) -> Maintenance:
        """Compaction, clustering, clean, archival, rollback, restore and savepoints, each returning a
        MaintenanceResult. What deletes data (clean, rollback, restore) is a dry run unless told
        (`dry_run=False`); see lakecore.table.maintenance."""
        return Maintenance(self)

    # Deprecated forwarders (one release): they return what they returned before, a plan, an instant,
    # an archival result or None depending on the flags; `maintenance` returns one result shape.

    def rollback(self, instant_time: str | Instant, *, dry_run: bool = True, force: bool = False,
                 expect: Literal["pending", "completed"] | None = None) -> Instant | UndoPlan:
        """Deprecated: use `table.maintenance.rollback(...)` (a MaintenanceResult)."""
        _deprecated("rollback")
        done = _old_shape(self.maintenance.rollback(instant_time, dry_run=dry_run, force=force,
                                                                expect=expect))
        assert isinstance(done, Instant | UndoPlan)
        return done

    def compact(self, strategy: CompactionStrategy | None = None, *, dry_run: bool = False,
                resume: bool = False) -> CompactionPlan | Instant | None:
        """Deprecated: use `table.maintenance.compact(...)` (a MaintenanceResult)."""
        _deprecated("compact")
        done = _old_shape(self.maintenance.compact(strategy, dry_run=dry_run, resume=resume))
        assert done is None or isinstance(done, CompactionPlan | Instant)
        return done

    def cluster(self, strategy: ClusteringStrategy | None = None, *, dry_run: bool = False,
                resume: bool = False) -> ClusteringPlan | Instant | None:
        """Deprecated: use `table.maintenance.cluster(...)` (a MaintenanceResult)."""
        _deprecated("cluster")
        done = _old_shape(self.maintenance.cluster(strategy, dry_run=dry_run, resume=resume))
        assert done is None or isinstance(done, ClusteringPlan | Instant)
        return done

    def clean(self, policy: CleanPolicy | None = None, *, dry_run: bool = True) -> CleanPlan | Instant | None:
        """Deprecated: use `table.maintenance.clean(...)` (a MaintenanceResult; a dry run unless told)."""
        _deprecated("clean")
        done = _old_shape(self.maintenance.clean(policy, dry_run=dry_run))
        assert done is None or isinstance(done, CleanPlan | Instant)
        return None if not dry_run and isinstance(done, CleanPlan) else done  # only rolled back: as before

    def archive(self, policy: ArchivalPolicy | None = None, *, dry_run: bool = False
                ) -> ArchivalPlan | ArchivalResult | None:
        """Deprecated: use `table.maintenance.archive(...)` (a MaintenanceResult)."""
        _deprecated("archive")
        done = _old_shape(self.maintenance.archive(policy, dry_run=dry_run))
        assert done is None or isinstance(done, ArchivalPlan | ArchivalResult)
        return done

    def savepoint(self, instant_time: str | Instant, *, comment: str = "", dry_run: bool = False
                  ) -> Instant | Savepoint:
        """Deprecated: use `table.maintenance.savepoint(...)` (a MaintenanceResult)."""
        _deprecated("savepoint")
        done = _old_shape(self.maintenance.savepoint(instant_time, comment=comment,
                                                                  dry_run=dry_run))
        assert isinstance(done, Instant | Savepoint)
        return done

    def restore(self, savepoint: str | Instant, *, dry_run: bool = True) -> UndoPlan | Instant | None:
        """Deprecated: use `table.maintenance.restore(...)` (a MaintenanceResult; a dry run unless told)."""
        _deprecated("restore")
        done = _old_shape(self.maintenance.restore(savepoint, dry_run=dry_run))
        assert done is None or isinstance(done, UndoPlan | Instant)
        return done

    # -- reads --------------------------------------------------------------------------------

    def timeline(self) -> Timeline:
        return self._store.load()

    def archived_instants(self, start: str = "", end: str | None = None) -> list[Instant]:
        """Archived (completed) instants with completion time in (start, end], oldest first; their
        commit_metadata() answers from the history."""
        archived = self.timeline().archived
        return self._store.archived_instants(archived.manifest, start, end) if archived.count else []

    def writes_after(self, after: str = "") -> tuple[int, str | None]:
        """How many writes (commit, deltacommit) completed after the timeline time `after` (an instant
        time, "yyyyMMddHHmmssSSS"; "": ever), archived ones included; and a completion time no write
        completed after (None: nothing completed yet): count from it next time to miss none and count
        none twice."""
        return self._store.writes_after(self.timeline(), after)

    def commit_metadata(self, instant: Instant | str) -> CommitMetadata:
        """What a completed instant wrote (files per file group, operation, schema); the instant, or its
        requested time (InstantNotFound: no such instant; InstantArchived: use archived_instants)."""
        if not isinstance(instant, Instant):
            instant = self.timeline().get(requested_time_of(instant))
        return self._store.metadata(instant)

    def read(self, *, as_of: str | datetime | None = None, columns: Sequence[str] | None = None,
             partitions: Mapping[str, Any] | None = None, filter: Filter | None = None,
             with_meta: bool = False, query: QueryType = "snapshot") -> pa.Table:
        """The table's rows: latest (snapshot), as of a past instant or time, or base files only. All of
        them in memory: `scan` streams them instead."""
        return self.scan(as_of=as_of, columns=columns, partitions=partitions, filter=filter,
                         with_meta=with_meta, query=query).to_arrow()

    def scan(self, *, columns: Sequence[str] | None = None, filter: Filter | None = None,
             partitions: Mapping[str, Any] | None = None, as_of: str | datetime | Instant | None = None,
             with_meta: bool = False, query: QueryType = "snapshot") -> Scan:
        """The rows `read` returns with the same arguments, as a stream: `.to_batches()`,
        `.to_arrow_batch_reader()` (DuckDB, Polars and anything taking an Arrow C stream read the scan
        itself too) or `.to_arrow()`. Planned now (the view as of now or `as_of`; bad arguments raise
        here), read when consumed: file slice by file slice, a few slices in memory at a time. `filter`:
        a pyarrow.compute expression, or conditions as `weir table read --where` takes them ("amount >
        100", or a list of them that must all hold)."""
        if query not in ("snapshot", "read_optimized"):
            raise InvalidInput(f"query {query!r} is not one of snapshot, read_optimized"
                               f"{did_you_mean([str(query)], ['snapshot', 'read_optimized'])}")
        if isinstance(columns, str):   # one column named, not a sequence of its letters
            columns = [columns]
        if isinstance(filter, str) or (isinstance(filter, (list, tuple)) and filter
                                       and all(isinstance(c, str) for c in filter)):
            filter = conditions_filter([filter] if isinstance(filter, str) else list(filter), self.schema,
                                       meta=with_meta)
        timeline = full = self.timeline()
        if as_of is not None:
            point = parse_point_in_time(as_of)
            timeline = self._store.as_of(full, point)
        view = view_of(self.storage, timeline)
        if as_of is not None:
            check_readable(self.storage, full, point, view)  # a clear error if a clean removed files
        plan = plan_scan(view, self.config, columns=columns, partitions=partitions, filter=filter,
                         with_meta=with_meta, base_only=query == "read_optimized")
        return Scan(self.storage, self.config, plan)

    def read_changes(self, start: str | datetime | Instant, end: str | datetime | Instant | None = None, *,
                     columns: Sequence[str] | None = None) -> pa.Table:
        """Records changed by instants completed in (start, end]: their latest version as of `end`,
        with `_weir_op` = 'upsert' or 'delete' and the meta columns. `start` and `end`: instant times,
        times, or Instants (a write's `result.instant`)."""
        first, last = parse_point_in_time(start), None if end is None else parse_point_in_time(end)
        return read_changes(self.storage, self.config, self.timeline(), first, last, columns=columns)

    # -- other engines ------------------------------------------------------------------------

    def publish(self, format: str, *, view: str | None = None, keep: int = 10,
                catalog: CatalogRef | None = None, format_version: int | None = None) -> PublishResult:
        """Write `format` ("iceberg" or "delta") metadata beside the table, over its Parquet files as they
        are, so other engines read the table as of its latest completed instant: the merged snapshot
        (`view="snapshot"`, the default) or its base files only (`"read_optimized"`, the only view of
        column-group tables). Incremental when it can be; crash-safe. `keep`: published snapshots kept
        for time travel at most (clean keeps their files). `catalog`: an Iceberg catalog (pyiceberg's)
        whose table then points at the new metadata. `format_version`: Iceberg's, 2 (position-delete
        files) or 3 (deletion vectors); None keeps the published table's (2 for a new one); 3 -> 2 is
        refused. See docs/interop.md."""
        return publish(self.storage, self.config, self.lock, format, view=view, keep=keep, catalog=catalog,
                       format_version=format_version)

    # -- inspection ---------------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        timeline = self.timeline()
        view = view_of(self.storage, timeline)
        files = [f for s in view.slices for f in s.files]
        last = timeline.last_completed()
        return {
            "uri": self.uri,
            "config": self.config.to_json(),
            "instants": {"total": timeline.total,
                         "completed": len(timeline.completed) + timeline.archived.count,
                         "active": len(timeline), "archived": timeline.archived.count,
                         "pending": [str(i) for i in timeline.pending],
                         "last_completed": str(last) if last else None},
            "partitions": len(view.partitions()),
            "file_groups": len(view.slices),
            "files": len(files),
            "bytes": sum(f.bytes for f in files),
        }

    def activity(self) -> dict[str, Any]:
        """What goes on at the table now: its lock (a storage lock: free, or held by whom), each pending
        instant with its writer's last sign of life or its service's run, and live archival runs
        (judged with this table's heartbeat settings; see concurrency/activity.py)."""
        return activity(self.storage, self.config.lock, self.timeline(), now_ms(),
                        heartbeat=self.options.heartbeat)

    def __repr__(self) -> str:
        return f"Table({self.config.name!r} at {self.uri!r}, {self.config.table_type})"


def _deprecated(method: str) -> None:
    warnings.warn(f"Table.{method}() is deprecated and goes in the next release: use "
                  f"table.maintenance.{method}(), which returns a MaintenanceResult", DeprecationWarning,
                  stacklevel=3)


def _old_shape(result: MaintenanceResult) -> Any:
    """What the `Table` methods returned before `Table.maintenance`: the instant, else the archival
    result, else the plan (None when nothing was due)."""
    return result.instant or result.archived or result.plan


def _read_config(storage: Storage) -> TableConfig:
    return _parse_config(storage, _config_bytes(storage))


def _current_config(storage: Storage) -> TableConfig:
    """table.json with the schema the newest write committed (the schema evolves through commits; columns
    added with add_columns are in table.json until a write commits them too)."""
    config = _read_config(storage)
    store = TimelineStore(storage)
    committed = store.latest_schema(store.load())
    return config.with_committed_schema(schema_from_json(committed)) if committed else config


_parsed_configs: dict[str, tuple[bytes, TableConfig]] = {}  # the last table.json parsed, per table


def _parse_config(storage: Storage, raw: bytes) -> TableConfig:
    """table.json parsed (and validated); the last parse per table is kept, so a lock that re-reads
    table.json after every acquire (TableLock) pays a read, not a parse, while it is unchanged."""
    hit = _parsed_configs.get(storage.uri)
    if hit is not None and hit[0] == raw:
        return hit[1]
    config = TableConfig.loads(raw, source=f"{storage.uri}/{CONFIG_PATH}", table=storage.uri)
    if len(_parsed_configs) > 1000:
        _parsed_configs.clear()
    _parsed_configs[storage.uri] = (raw, config)
    return config


def _config_bytes(storage: Storage) -> bytes:
    try:
        return storage.read(CONFIG_PATH)
    except (FileNotFoundError, NotADirectoryError):
        if storage.list_names(TIMELINE_DIR):
            raise TableNotFound(f"{storage.uri} has a timeline but no {CONFIG_PATH} (it was lost); "
                                f"recreate it from the timeline with `weir table repair {storage.uri} "
                                "--run`") from None
        raise TableNotFound(f"no table at {storage.uri} (no {CONFIG_PATH}); check the URI, or create one "
                            "with `weir table create`") from None


def _spec_to_record(lock: Lock | LockSpec | None, uri: str) -> LockSpec:
    """What table.json records for `lock`; a ZooKeeper spec without a path gets the table's default."""
    if lock is None:
        return LockSpec()
    spec = lock if isinstance(lock, LockSpec) else spec_of(lock)
    if spec is None:
        raise InvalidTableConfig(f"{lock!r} does not say which table lock it is (no `spec`); pass a lakecore "
                                 "lock (StorageLock, InProcessLock, ZooKeeperLock) or a LockSpec")
    if spec.provider == "zookeeper" and spec.path is None:
        from lakecore.concurrency.locks.zookeeper import zookeeper_spec

        spec = zookeeper_spec(spec.connect or "", uri)
    return spec


def _table_lock(storage: Storage, recorded: LockSpec, asked: Lock | LockSpec | None,
                reread: Callable[[], LockSpec]) -> Lock:
    """The recorded lock (`asked`, checked against it, when it is a lock object), guarded by TableLock,
    which calls `reread` (table.json's lock now) after each acquire."""
    if asked is not None:
        check_lock(recorded, asked if isinstance(asked, LockSpec) else spec_of(asked), storage.uri)
    inner = lock_for_spec(storage, recorded) if asked is None or isinstance(asked, LockSpec) else asked
    if isinstance(inner, TableLock):
        inner = inner.inner
    return TableLock(inner, recorded, reread, storage.uri)


def _name_from_uri(uri: str) -> str:
    tail = uri.rstrip("/").rsplit("/", 1)[-1] or "table"
    cleaned = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in tail).lstrip("_.-")
    return cleaned[:128] or "table"

