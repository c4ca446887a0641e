"""The table configuration persisted in `<base>/.weir/table.json`, and the names of meta columns.

Owns: `TableConfig` and `ColumnGroup` (validated, immutable), their JSON form, and the codec of Arrow
schemas to plain JSON (so table.json stays human-readable and diffable). Must not do I/O: the table
facade reads and writes the file through storage.
"""

from __future__ import annotations

import difflib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

import pyarrow as pa

from lakecore.errors import (
    CorruptMetadata,
    InvalidTableConfig,
    SchemaConflict,
    UnsupportedTableVersion,
    UnsupportedType,
)

# 2: table.json records `bucket_hash`; new tables hash record keys with Spark's Murmur3 (layout.murmur3).
# Format-1 tables (no `bucket_hash`) keep the format-1 hash (layout.buckets) for ever.
FORMAT_VERSION = 2

TableType = Literal["merge_on_read", "copy_on_write"]
MergeMode = Literal["commit_time", "event_time", "partial_update"]
ConcurrencyMode = Literal["single_writer", "optimistic", "non_blocking"]
LockProvider = Literal["storage", "zookeeper", "in_process"]
# the function from record key to bucket (part of the on-disk format: fixed when the table is created)
BucketHash = Literal["weir_v1", "spark_murmur3"]
# the Parquet codec of the table's data files: what pyarrow writes ("lz4" is Parquet's LZ4_RAW, "none"
# uncompressed). Every codec but brotli is read by each engine the project tests (DuckDB, daft, polars,
# pyiceberg, deltalake, Spark with Iceberg and Delta); Spark's Parquet reader has no brotli codec, so a
# table is never set to it (one made by an older weir keeps it and is read by weir as before).
SettableCodec = Literal["zstd", "lz4", "snappy", "gzip", "none"]   # the codecs a table is set to
Codec = Literal[SettableCodec, "brotli"]
CODECS: tuple[SettableCodec, ...] = get_args(SettableCodec)
DEFAULT_CODEC: SettableCodec = "zstd"
_CODEC_ALIASES = {"lz4_raw": "lz4"}  # what pyarrow also took for a codec (in any case) when no check ran

CONFIG_PATH = ".weir/table.json"  # where a table keeps this configuration, relative to its base

# Meta columns. Stored in files: commit time (every file), op (log files), per-group ordering values
# (partial-update tables). Derived on read: record key, partition path, file name.
META_PREFIX = "_weir_"
COMMIT_TIME = "_weir_commit_time"
RECORD_KEY = "_weir_record_key"
PARTITION_PATH = "_weir_partition_path"
FILE_NAME = "_weir_file_name"
OP = "_weir_op"
OP_UPSERT = 0
OP_DELETE = 1
META_COLUMNS = (COMMIT_TIME, RECORD_KEY, PARTITION_PATH, FILE_NAME)

# Parquet field ids. Every table column (and every nested field and list element) has a stable id in
# table.json (`"id"` in the schema JSON, PARQUET:field_id in the Arrow field metadata): a new column
# gets the next id after `last_column_id`, ids are never reused, and a table.json written before ids
# existed gets them deterministically (depth first, in schema order, from 1) each time it is read, so
# no data is rewritten. The stored meta columns have reserved ids from META_FIELD_ID_BASE (below
# Iceberg's reserved range), never a table column's.
FIELD_ID = b"PARQUET:field_id"
META_FIELD_ID_BASE = 2_147_482_000


def field_id(f: pa.Field) -> int | None:
    raw = (f.metadata or {}).get(FIELD_ID)
    return int(raw) if raw is not None else None


def with_field_id(f: pa.Field, fid: int) -> pa.Field:
    return f.with_metadata({**(f.metadata or {}), FIELD_ID: str(fid).encode()})


def _children(t: pa.DataType) -> list[pa.Field] | None:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [t.value_field]
    return None


def _rebuilt(t: pa.DataType, children: list[pa.Field]) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct(children)
    return pa.large_list(children[0]) if pa.types.is_large_list(t) else pa.list_(children[0])


def assign_field_ids(schema: pa.Schema, last: int) -> tuple[pa.Schema, int]:
    """`schema` with an id on every field (nested ones and list elements too), those without one
    numbered after `last` depth first; and the new last id."""
    top = last
    for f in schema:
        top = max(top, _max_id(f))

    def walk(f: pa.Field) -> pa.Field:
        nonlocal top
        if field_id(f) is None:
            top += 1
            f = with_field_id(f, top)
        kids = _children(f.type)
        if kids is not None:
            f = f.with_type(_rebuilt(f.type, [walk(k) for k in kids]))
        return f

    fields = [walk(f) for f in schema]
    return pa.schema(fields, metadata=schema.metadata), top


def _max_id(f: pa.Field) -> int:
    own = field_id(f) or 0
    return max([own, *(_max_id(k) for k in _children(f.type) or ())])


def carry_field_ids(schema: pa.Schema, known: pa.Schema) -> pa.Schema:
    """`schema` with the ids of the same-named columns of `known` (a column is never retyped, so its
    nested fields match too); other columns as they are."""
    fields = [known.field(f.name) if f.name in known.names and field_id(f) is None
              and known.field(f.name).type == f.type else f for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def group_ordering_column(group: str) -> str:
    """Hidden column holding a column group's ordering value (null: the row does not carry the group)."""
    return f"{META_PREFIX}ord__{group}"


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_ORDERABLE = (pa.types.is_integer, pa.types.is_floating, pa.types.is_timestamp, pa.types.is_date,
              pa.types.is_string, pa.types.is_large_string, pa.types.is_decimal)


@dataclass(frozen=True)
class ColumnGroup:
    """Columns one stream owns in a partial-update table, guarded by the group's own ordering field."""

    name: str
    columns: tuple[str, ...]
    ordering_field: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "columns": list(self.columns), "ordering_field": self.ordering_field}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ColumnGroup:
        return cls(name=obj["name"], columns=tuple(obj["columns"]), ordering_field=obj["ordering_field"])


@dataclass(frozen=True)
class LockSpec:
    """Which lock every writer of the table takes; recorded in table.json, never with credentials.

    storage: generation files under `<base>/.weir/locks/` (needs atomic create-if-absent).
    zookeeper: kazoo's Lock recipe at `path` on the ensemble `connect` ("host:2181[,host:2181][/chroot]").
    in_process: threads of one process only; for a table that a single process ever writes.
    """

    provider: LockProvider = "storage"
    connect: str | None = None
    path: str | None = None

    def __post_init__(self) -> None:
        if self.provider not in get_args(LockProvider):
            raise InvalidTableConfig(f"unknown lock provider {self.provider!r}; use one of "
                                     f"{', '.join(repr(p) for p in get_args(LockProvider))}")
        if self.provider != "zookeeper":
            if self.connect is not None or self.path is not None:
                raise InvalidTableConfig(f"lock provider {self.provider!r} takes no connect string or path; "
                                         "drop them, or use provider 'zookeeper'")
            return
        if not isinstance(self.connect, str) or not self.connect.strip() or "@" in self.connect:
            raise InvalidTableConfig("lock provider 'zookeeper' needs a connect string 'host:2181"
                                     f"[,host2:2181][/chroot]' (no credentials), got {self.connect!r}")
        p = self.path
        if p is not None and (not isinstance(p, str) or p[:1] != "/" or p.endswith("/") or "//" in p):
            raise InvalidTableConfig(f"ZooKeeper lock path must look like '/weir/locks/<table>', got {p!r}")

    def ensemble(self) -> tuple[frozenset[str], str]:
        """The connect string as (servers, chroot): the order servers are listed in does not matter."""
        hosts, _, chroot = (self.connect or "").strip().partition("/")
        return frozenset(h.strip() for h in hosts.split(",") if h.strip()), chroot.rstrip("/")

    def mismatch(self, asked: LockSpec) -> str | None:
        """Why `asked` is not this lock (None: it is). `asked.path` None means "the table's path"."""
        if asked.provider != self.provider:
            return f"it asks for provider {asked.provider!r}"
        if self.provider == "zookeeper":
            if asked.ensemble() != self.ensemble():
                return f"it asks for the ZooKeeper ensemble {asked.connect!r}"
            if asked.path is not None and asked.path != self.path:
                return f"it asks for the ZooKeeper lock path {asked.path!r}"
        return None

    def describe(self) -> str:
        if self.provider == "zookeeper":
            return f"the ZooKeeper lock {self.path} on {self.connect}"
        if self.provider == "storage":
            return "the storage lock (files under .weir/locks)"
        return "an in-process lock (one writing process only)"

    def to_json(self) -> dict[str, Any]:
        if self.provider != "zookeeper":
            return {"provider": self.provider}
        return {"provider": self.provider, "connect": self.connect, "path": self.path}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LockSpec:
        return cls(provider=obj["provider"], connect=obj.get("connect"), path=obj.get("path"))


@dataclass(frozen=True)
class TableConfig:
    """Everything that defines a table and never changes after create (except the schema's evolution,
    through commits, the lock, through `Table.set_lock_provider`, and the codec of files written from
    then on, through `Table.set_compression`)."""

    name: str
    schema: pa.Schema
    record_key: tuple[str, ...]
    partition_fields: tuple[str, ...] = ()
    table_type: TableType = "merge_on_read"
    ordering_field: str | None = None
    merge_mode: MergeMode = "commit_time"
    column_groups: tuple[ColumnGroup, ...] = ()
    column_defaults: Mapping[str, Any] = field(default_factory=dict)
    buckets: int = 4
    compression: Codec = DEFAULT_CODEC
    concurrency_mode: ConcurrencyMode = "optimistic"
    # deletes are kept in base files as tombstones (so late, older events still lose to them) until
    # they are this many hours older than the instant rewriting the base; None keeps them for ever
    tombstone_retention_hours: float | None = None
    # the lock every writer takes; table.json files written before it was recorded mean "storage"
    lock: LockSpec = LockSpec()
    format_version: int = FORMAT_VERSION
    # None: chosen at create, "spark_murmur3" when every record-key type has Spark's Murmur3 counterpart
    # (so Spark jobs compute buckets in the JVM), else "weir_v1"; format-1 tables are all "weir_v1"
    bucket_hash: BucketHash | None = None
    # the highest Parquet field id ever given to a column (see FIELD_ID): new columns count on from it
    last_column_id: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "compression", known_codec(self.compression, self.name))
        _check_unique_names(self)   # before anything looks a column up by name
        if self.bucket_hash is None:
            object.__setattr__(self, "bucket_hash", _default_bucket_hash(self))
        schema, last = assign_field_ids(self.schema, self.last_column_id)
        object.__setattr__(self, "schema", schema)
        object.__setattr__(self, "last_column_id", last)
        _validate(self)

    # -- derived views ---------------------------------------------------------------------

    @property
    def data_columns(self) -> tuple[str, ...]:
        """Columns a write can change: all but record key and partition fields."""
        fixed = set(self.record_key) | set(self.partition_fields)
        return tuple(n for n in self.schema.names if n not in fixed)

    @property
    def ordering_fields(self) -> tuple[str, ...]:
        if self.merge_mode == "partial_update":
            return tuple(dict.fromkeys(g.ordering_field for g in self.column_groups))
        return (self.ordering_field,) if self.ordering_field else ()

    def shared_ordering_fields(self) -> tuple[str, ...]:
        """Ordering fields used by more than one column group (stored as the max over those groups)."""
        owners: dict[str, int] = {}
        for g in self.column_groups:
            owners[g.ordering_field] = owners.get(g.ordering_field, 0) + 1
        return tuple(f for f, n in owners.items() if n > 1)

    def group(self, name: str) -> ColumnGroup:
        for g in self.column_groups:
            if g.name == name:
                return g
        raise InvalidTableConfig(f"table {self.name!r} has no column group {name!r}; "
                                 f"groups are {[g.name for g in self.column_groups]}")

    def with_schema(self, schema: pa.Schema) -> TableConfig:
        """This config with `schema`: its columns keep their field ids, new ones get the next."""
        return replace(self, schema=carry_field_ids(schema, self.schema))

    def with_lock(self, lock: LockSpec) -> TableConfig:
        return replace(self, lock=lock)

    def with_compression(self, codec: str) -> TableConfig:
        """This config writing its next files with `codec` (one of CODECS, else InvalidTableConfig)."""
        return replace(self, compression=settable_codec(codec, self.name))

    def with_committed_schema(self, committed: pa.Schema) -> TableConfig:
        """This config (table.json's) with the schema the newest write committed: its columns, then the
        columns only table.json has (added by `with_added_columns` since; rows written before read null).
        SchemaConflict when a column-group table gained columns this config does not place in a group:
        the config was read before they were added."""
        unplaced = [n for n in committed.names if n not in self.schema.names]
        if unplaced and self.column_groups:
            raise SchemaConflict(f"table {self.name!r} gained column(s) {unplaced} since this handle read "
                                 "its configuration; open the table again (Table.open) and rerun")
        known = set(committed.names)
        added = [f for f in self.schema if f.name not in known]
        return self.with_schema(pa.schema([*committed, *added], metadata=committed.metadata))

    def with_added_columns(self, fields: Sequence[pa.Field], groups: Mapping[str, str]) -> TableConfig:
        """The config after adding the nullable `fields` (schema evolution without a write); on a
        column-group table `groups` names each new column's group (column -> group), which it joins: every
        data column belongs to exactly one group, and a column never changes group. A field the schema
        has with the same type and nullability is left as it is (adding twice is a no-op)."""
        def bad(msg: str) -> InvalidTableConfig:
            return InvalidTableConfig(f"table {self.name!r}: {msg}")

        if groups and not self.column_groups:
            raise bad("the table has no column groups; add the columns without naming groups")
        new = []
        for f in fields:
            if f.name not in self.schema.names:
                if not f.nullable:
                    raise bad(f"new column {f.name!r} must be nullable: rows written before it have no value")
                new.append(f)
                continue
            have = self.schema.field(f.name)
            if (have.type, have.nullable) != (f.type, f.nullable):
                raise bad(f"column {f.name!r} exists as {have.type}{'' if have.nullable else ' not null'}; "
                          "columns are never retyped: add a column with another name")
            if f.name in groups and groups[f.name] != _group_of(self, f.name):
                raise bad(f"column {f.name!r} is in group {_group_of(self, f.name)!r}, and a column never "
                          "moves to another group")
        names = [f.name for f in new]
        if (why := case_twins(self.schema.names, names)) is not None:
            raise bad(why)
        schema = pa.schema([*self.schema, *new], metadata=self.schema.metadata)
        if not self.column_groups:
            return self.with_schema(schema)
        known = [g.name for g in self.column_groups]
        ungrouped = [n for n in names if n not in groups]
        if ungrouped:
            raise bad(f"new column(s) {ungrouped} name no column group, and every data column of a "
                      f"column-group table belongs to exactly one: name one of {known} for each")
        unknown = sorted({groups[n] for n in names if groups[n] not in known})
        if unknown:
            raise bad(f"there is no column group {', '.join(map(repr, unknown))}; the groups are {known} "
                      "(groups never change: another grouping needs a new table)")
        joined = tuple(replace(g, columns=(*g.columns, *(n for n in names if groups[n] == g.name)))
                       for g in self.column_groups)
        return replace(self, schema=schema, column_groups=joined)  # new columns: the next field ids

    # -- JSON ------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "format_version": self.format_version,
            "name": self.name,
            "table_type": self.table_type,
            "record_key": list(self.record_key),
            "partition_fields": list(self.partition_fields),
            "ordering_field": self.ordering_field,
            "merge_mode": self.merge_mode,
            "column_groups": [g.to_json() for g in self.column_groups],
            "column_defaults": dict(self.column_defaults),
            "buckets": self.buckets,
            "compression": self.compression,
            "concurrency_mode": self.concurrency_mode,
            "tombstone_retention_hours": self.tombstone_retention_hours,
            "lock": self.lock.to_json(),
            "bucket_hash": self.bucket_hash,
            "last_column_id": self.last_column_id,
            "schema": schema_to_json(self.schema),
        }

    def dumps(self) -> bytes:
        return json.dumps(self.to_json(), indent=2, sort_keys=True).encode()

    @classmethod
    def from_json(cls, obj: Mapping[str, Any], *, table: str = "TABLE") -> TableConfig:
        fix = (f"recreate it from the timeline with `weir table repair {table} --run` (or restore it from "
               "a backup)")
        version = obj.get("format_version")
        if not isinstance(version, int):
            raise CorruptMetadata(f"table.json has no integer format_version; {fix}")
        if version > FORMAT_VERSION:
            raise UnsupportedTableVersion(
                f"table format version {version} is newer than this lakecore reads ({FORMAT_VERSION}); "
                "upgrade weir")
        codec = obj.get("compression", DEFAULT_CODEC)
        try:
            known_codec(codec)
        except InvalidTableConfig:
            raise InvalidTableConfig(f"{table}/{CONFIG_PATH} records compression {codec!r}, which is not a "
                                     f"Parquet codec; set its \"compression\" to one of {_codec_choices()} "
                                     "(files already written keep their codec)") from None
        try:
            return cls(
                name=obj["name"],
                schema=schema_from_json(obj["schema"]),
                record_key=tuple(obj["record_key"]),
                partition_fields=tuple(obj.get("partition_fields", ())),
                table_type=obj["table_type"],
                ordering_field=obj.get("ordering_field"),
                merge_mode=obj["merge_mode"],
                column_groups=tuple(ColumnGroup.from_json(g) for g in obj.get("column_groups", ())),
                column_defaults=dict(obj.get("column_defaults", {})),
                buckets=int(obj["buckets"]),
                compression=codec,
                concurrency_mode=obj.get("concurrency_mode", "optimistic"),
                tombstone_retention_hours=obj.get("tombstone_retention_hours"),
                lock=LockSpec.from_json(obj.get("lock") or {"provider": "storage"}),
                format_version=version,
                bucket_hash=obj.get("bucket_hash", "weir_v1"),  # format 1 recorded none: its one hash
                last_column_id=int(obj.get("last_column_id", 0)),  # none before field ids: assigned
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptMetadata(f"table.json is missing or has a malformed field ({exc!r}); {fix}") from exc

    @classmethod
    def loads(cls, data: bytes, *, source: str = "table.json", table: str = "TABLE") -> TableConfig:
        fix = (f"recreate it from the timeline with `weir table repair {table} --run` (or restore it from "
               "a backup)")
        try:
            obj = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptMetadata(f"{source} is not valid JSON ({exc}); it is truncated or corrupted: "
                                  f"{fix}") from exc
        if not isinstance(obj, dict):
            raise CorruptMetadata(f"{source} does not hold a JSON object; {fix}")
        return cls.from_json(obj, table=table)


def _codec_choices() -> str:
    return ", ".join(CODECS)


def known_codec(codec: Any, table: str = "TABLE") -> Codec:
    """`codec` in table.json's form (lower case; "lz4_raw" is "lz4"); InvalidTableConfig when pyarrow
    writes no such Parquet codec."""
    name = _CODEC_ALIASES.get(codec.lower(), codec.lower()) if isinstance(codec, str) else codec
    if name not in get_args(Codec):
        raise InvalidTableConfig(f"table {table!r}: compression {codec!r} is not a Parquet codec; use one of "
                                 f"{_codec_choices()}")
    return name  # type: ignore[return-value]


def settable_codec(codec: Any, table: str = "TABLE") -> SettableCodec:
    """`codec` as a table may be set to it (create, set_compression): one of CODECS, else
    InvalidTableConfig naming them."""
    name = known_codec(codec, table)
    if name not in CODECS:
        raise InvalidTableConfig(f"table {table!r}: compression {codec!r} is refused: Spark's Parquet reader "
                                 f"(Iceberg, Delta) cannot read it; use one of {_codec_choices()}")
    return name


def default_merge_mode(ordering_field: str | None, column_groups: Sequence[ColumnGroup]) -> MergeMode:
    if column_groups:
        return "partial_update"
    return "event_time" if ordering_field else "commit_time"


def murmur3_key_type(t: pa.DataType) -> bool:
    """Whether a record key of stored type `t` has a Spark Murmur3 counterpart (layout.murmur3): bool,
    int8-int64, string, binary, date32, timestamp, decimal128; not unsigned integers or times."""
    return (pa.types.is_boolean(t) or t in (pa.int8(), pa.int16(), pa.int32(), pa.int64())
            or pa.types.is_date32(t) or pa.types.is_timestamp(t) or pa.types.is_string(t)
            or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_decimal128(t))


def _default_bucket_hash(c: TableConfig) -> BucketHash:
    if c.format_version < 2 or not all(n in c.schema.names and murmur3_key_type(c.schema.field(n).type)
                                       for n in c.record_key):
        return "weir_v1"
    return "spark_murmur3"


def _check_unique_names(c: TableConfig) -> None:
    names = c.schema.names
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise InvalidTableConfig(f"table {c.name!r}: the schema names {', '.join(map(repr, twice))} more "
                                 "than once; name each column once")


def case_twins(names: Sequence[str], new: Sequence[str]) -> str | None:
    """Why a `new` column name may not join `names` (which it extends): it differs from another only by
    case. Spark (case-insensitive by default), Delta and DuckDB take such names for one column, so a
    table holding both is one they cannot read. None when every name is distinct ignoring case."""
    seen: dict[str, str] = {}
    for name in [*names, *new]:
        twin = seen.setdefault(name.casefold(), name)
        if twin != name and name in new:
            return (f"column {name!r} differs from {twin!r} only by case, and Spark, Delta and DuckDB take "
                    "the two for one column; name it differently")
    return None


def _validate(c: TableConfig) -> None:
    def bad(msg: str) -> InvalidTableConfig:
        return InvalidTableConfig(f"table {c.name!r}: {msg}")

    if not _NAME.match(c.name or ""):
        raise bad("name must be 1-128 characters of letters, digits, '_', '.', '-'")
    if c.table_type not in get_args(TableType):
        raise bad(f"table_type must be one of {get_args(TableType)}, got {c.table_type!r}")
    if c.merge_mode not in get_args(MergeMode):
        raise bad(f"merge_mode must be one of {get_args(MergeMode)}, got {c.merge_mode!r}")
    if c.concurrency_mode not in get_args(ConcurrencyMode):
        raise bad(f"concurrency_mode must be one of {get_args(ConcurrencyMode)}, got {c.concurrency_mode!r}")
    t = c.tombstone_retention_hours
    if t is not None and (isinstance(t, bool) or not isinstance(t, int | float) or t < 0):
        raise bad(f"tombstone_retention_hours must be a number >= 0 (or null to keep tombstones), got {t!r}")
    if c.concurrency_mode == "non_blocking" and c.table_type != "merge_on_read":
        raise bad("non_blocking concurrency needs a merge_on_read table (writers only append log files); "
                  "use optimistic for copy_on_write")
    if not isinstance(c.buckets, int) or not 1 <= c.buckets <= 65536:
        raise bad(f"buckets must be an integer in 1..65536, got {c.buckets!r}")
    names = c.schema.names
    reserved = [n for n in names if n.startswith(META_PREFIX)]
    if reserved:
        raise bad(f"column names starting with {META_PREFIX!r} are reserved: {reserved}")
    for f in c.schema:
        check_supported_type(f.name, f.type)
    if not c.record_key:
        raise bad("record_key needs at least one column")
    for role, cols in (("record_key", c.record_key), ("partition_fields", c.partition_fields)):
        missing = [n for n in cols if n not in names]
        if missing:
            raise bad(f"{role} {_not_in(missing, names)}")
        for n in cols:
            t = c.schema.field(n).type
            if pa.types.is_nested(t) or pa.types.is_floating(t):
                raise bad(f"{role} column {n!r} has type {t}; use a string, integer, date or timestamp")
    if set(c.record_key) & set(c.partition_fields):
        raise bad("a column cannot be both record key and partition field")
    if c.bucket_hash not in get_args(BucketHash):
        raise bad(f"bucket_hash must be one of {get_args(BucketHash)}, got {c.bucket_hash!r}")
    if c.bucket_hash == "spark_murmur3":
        if c.format_version < 2:
            raise bad(f"bucket_hash 'spark_murmur3' needs table format 2, the table.json says "
                      f"{c.format_version}; a format-1 table keeps bucket_hash 'weir_v1'")
        odd = [f"{n} ({c.schema.field(n).type})" for n in c.record_key
               if not murmur3_key_type(c.schema.field(n).type)]
        if odd:
            raise bad(f"record key column(s) {', '.join(odd)} have no Spark Murmur3 hash; use bucket_hash "
                      "'weir_v1', or a key of bool, int8-int64, string, binary, date32, timestamp or decimal")
    if c.merge_mode == "event_time" and not c.ordering_field:
        raise bad("merge_mode 'event_time' needs an ordering_field")
    if c.merge_mode == "commit_time" and c.ordering_field:
        raise bad("merge_mode 'commit_time' ignores ordering_field; drop it or use 'event_time'")
    if c.ordering_field:
        _check_orderable(c, c.ordering_field, bad)
    if c.merge_mode == "partial_update":
        _validate_groups(c, bad)
    elif c.column_groups:
        raise bad("column_groups need merge_mode 'partial_update'")
    for col, value in c.column_defaults.items():
        if col not in names:
            raise bad(f"column_defaults names {col!r}, which is not in the schema")
        try:
            pa.scalar(value, c.schema.field(col).type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise bad(f"default {value!r} does not fit column {col!r} ({exc})") from exc


# the LakeTable CRD's type names (spec.schema[].type), and the short ones `weir table create` took first
TYPE_NAMES: Mapping[str, pa.DataType] = {
    "bool": pa.bool_(), "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "float32": pa.float32(), "float64": pa.float64(), "string": pa.string(), "binary": pa.binary(),
    "date32": pa.date32(), "timestamp_ms": pa.timestamp("ms", tz="UTC"),
    "timestamp_us": pa.timestamp("us", tz="UTC")}
SHORT_TYPE_NAMES = {"double": "float64", "date": "date32", "timestamp": "timestamp_us"}
TYPES_LISTED = (*TYPE_NAMES, "decimal128(precision,scale)")
_DECIMAL = re.compile(r"decimal(?:128)?\(\s*(\d+)\s*,\s*(\d+)\s*\)")
# what other systems call these types: told as the likely one (never taken silently: `float` is 32 bits
# in Spark SQL and 64 in Python)
_OTHER_TYPE_NAMES = {
    "int": "int64", "integer": "int64", "long": "int64", "bigint": "int64", "short": "int16",
    "smallint": "int16", "byte": "int8", "tinyint": "int8", "float": "float64 or float32", "real": "float32",
    "boolean": "bool", "str": "string", "text": "string", "varchar": "string", "utf8": "string",
    "bytes": "binary", "datetime": "timestamp_us", "numeric": "decimal128(precision,scale)"}


def type_named(name: str, column: str) -> pa.DataType:
    """Column `column`'s type by its LakeTable name (TYPE_NAMES, decimal128(p,s), or a short name); an
    unknown one is InvalidTableConfig naming the likely one (`unknown type 'long' for column 'id' (did you
    mean int64?)`); callers add the remedy."""
    decimal = _DECIMAL.fullmatch(name)
    if decimal is not None:
        precision, scale = int(decimal.group(1)), int(decimal.group(2))
        if not 1 <= precision <= 38 or scale > precision:
            raise InvalidTableConfig(f"type {name!r} of column {column!r}: a decimal's precision is 1-38 and "
                                     "its scale at most its precision; e.g. decimal128(10,2)")
        return pa.decimal128(precision, scale)
    found = TYPE_NAMES.get(SHORT_TYPE_NAMES.get(name, name))
    if found is not None:
        return found
    close = likely_type(name)
    raise InvalidTableConfig(f"unknown type {name!r} for column {column!r}"
                             + (f" (did you mean {close}?)" if close else ""))


def type_name(kind: pa.DataType) -> str:
    """`kind` by its LakeTable name (`timestamp_us`, `decimal128(10,2)`; `type_named` read backwards), or
    Arrow's own for a type the CRD has no name for (`timestamp[ns]`, a timestamp without a time zone)."""
    if pa.types.is_decimal128(kind):
        return f"decimal128({kind.precision},{kind.scale})"
    for name, known in TYPE_NAMES.items():
        if kind == known:
            return name
    return str(kind)


def likely_type(name: str) -> str | None:
    """The LakeTable type name a mistaken one most likely meant (`long` -> int64, `date` -> date32,
    `strin` -> string), or None."""
    if name in SHORT_TYPE_NAMES:
        return SHORT_TYPE_NAMES[name]
    if name.lower() in _OTHER_TYPE_NAMES:
        return _OTHER_TYPE_NAMES[name.lower()]
    close = difflib.get_close_matches(name, [*TYPE_NAMES, *SHORT_TYPE_NAMES], n=1, cutoff=0.6)
    return SHORT_TYPE_NAMES.get(close[0], close[0]) if close else None


def schema_of(value: pa.Schema | Mapping[str, pa.DataType | str]) -> pa.Schema:
    """A table's schema as given: a pyarrow schema, or a mapping of column names to types (pyarrow's, or
    their LakeTable names: `{"id": "int64", "at": "timestamp_us"}`)."""
    if isinstance(value, pa.Schema):
        return value
    if not isinstance(value, Mapping):
        raise InvalidTableConfig(f"schema is a pyarrow.Schema or a mapping of column names to types "
                                 f"({{'id': 'int64', 'name': 'string'}}), not {type(value).__name__}")
    fields = []
    for name, t in value.items():
        if isinstance(t, pa.DataType):
            fields.append(pa.field(str(name), t))
            continue
        try:
            fields.append(pa.field(str(name), type_named(str(t), str(name))))
        except InvalidTableConfig as exc:
            raise InvalidTableConfig(f"{exc}; use one of {', '.join(TYPES_LISTED)}, or a pyarrow type") \
                from None
    return pa.schema(fields)


def did_you_mean(missing: Sequence[str], names: Sequence[str]) -> str:
    """` (did you mean 'id'?)` when each of the `missing` names is close to one of `names` (a
    misspelling), else nothing."""
    folded = {n.casefold(): n for n in names}   # `ID` for `id`: no spelling is closer, difflib sees none
    close = [m for n in missing for m in ([folded[n.casefold()]] if n.casefold() in folded else
                                          difflib.get_close_matches(n, names, n=1, cutoff=0.6))]
    return f" (did you mean {', '.join(map(repr, close))}?)" if close and len(close) == len(missing) else ""


def _not_in(missing: Sequence[str], names: Sequence[str]) -> str:
    """`'idx' is not in the schema (did you mean 'id'?); its columns: id, ts, name`."""
    verb = "is" if len(missing) == 1 else "are"
    return (f"{', '.join(map(repr, missing))} {verb} not in the schema{did_you_mean(missing, names)}; "
            f"its columns: {', '.join(names)}")


def _check_orderable(c: TableConfig, name: str, bad: Any) -> None:
    if name not in c.schema.names:
        raise bad(f"ordering field {_not_in([name], c.schema.names)}")
    t = c.schema.field(name).type
    if not any(pred(t) for pred in _ORDERABLE):
        raise bad(f"ordering field {name!r} has type {t}; use an integer, float, timestamp, date or string")


def _validate_groups(c: TableConfig, bad: Any) -> None:
    if c.ordering_field:
        raise bad("partial_update takes one ordering_field per column group, not a table-wide one")
    if not c.column_groups:
        raise bad("merge_mode 'partial_update' needs column_groups")
    group_names = [g.name for g in c.column_groups]
    if len(set(group_names)) != len(group_names):
        raise bad(f"duplicate column group names {group_names}")
    for g in c.column_groups:
        if not _NAME.match(g.name) or "__" in g.name:
            raise bad(f"column group name {g.name!r} must be letters, digits, '_', '.', '-' without '__'")
        _check_orderable(c, g.ordering_field, bad)
    problem = column_group_problem(c.schema.names, c.record_key, c.partition_fields, c.column_groups)
    if problem:
        raise bad(problem)


def column_group_problem(columns: Sequence[str], record_key: Sequence[str], partition_fields: Sequence[str],
                         groups: Sequence[ColumnGroup]) -> str | None:
    """Why `groups` cannot group a table of `columns` (None: they can). The data columns (all but the
    record key and partition fields) each belong to exactly one group: listed in its columns, or its
    own ordering field (normalize_groups adds it); an ordering field several groups share belongs to
    none. The operator checks a LakeTable spec with this, as table creation does."""
    groups = normalize_groups(groups)
    fixed = {*record_key, *partition_fields}
    data = [n for n in columns if n not in fixed]
    owners = Counter(g.ordering_field for g in groups)
    shared = {f for f, n in owners.items() if n > 1}
    seen: dict[str, str] = {}
    for g in groups:
        if not g.columns:
            return f"column group {g.name!r} has no columns; list the data columns it owns"
        for col in g.columns:
            if col not in columns:
                return f"column group {g.name!r} lists {col!r}, which is not in the schema; add it or drop it"
            if col not in data:
                return (f"column group {g.name!r} lists {col!r}, a record key or partition field, which "
                        "every group carries already; drop it from the group (and order no group by it)")
            if col in seen:
                return (f"column {col!r} is in groups {seen[col]!r} and {g.name!r} (a group's ordering field "
                        "is in its group); a column belongs to one group: drop it from the other")
            if col in shared:
                return (f"ordering field {col!r} is shared by several groups, so no group may list it; "
                        f"drop it from group {g.name!r}")
            seen[col] = g.name
    ungrouped = [n for n in data if n not in seen and n not in shared]
    if ungrouped:
        return (f"column(s) {ungrouped} belong to no column group, and every data column belongs to exactly "
                "one; add each to one group's columns")
    return None


def _group_of(c: TableConfig, column: str) -> str | None:
    return next((g.name for g in c.column_groups if column in g.columns), None)


def normalize_groups(groups: Sequence[ColumnGroup]) -> tuple[ColumnGroup, ...]:
    """Add each group's own (unshared) ordering field to its columns, so it travels with the group."""
    counts: dict[str, int] = {}
    for g in groups:
        counts[g.ordering_field] = counts.get(g.ordering_field, 0) + 1
    out = []
    for g in groups:
        if counts[g.ordering_field] == 1 and g.ordering_field not in g.columns:
            g = replace(g, columns=(*g.columns, g.ordering_field))
        out.append(g)
    return tuple(out)


# -- Arrow schema <-> JSON ---------------------------------------------------------------------

_PRIMITIVES: dict[str, pa.DataType] = {
    "bool": pa.bool_(), "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "uint8": pa.uint8(), "uint16": pa.uint16(), "uint32": pa.uint32(), "uint64": pa.uint64(),
    "float32": pa.float32(), "float64": pa.float64(), "string": pa.string(),
    "large_string": pa.large_string(), "binary": pa.binary(), "large_binary": pa.large_binary(),
    "date32": pa.date32(),
}
_PRIMITIVE_NAMES = {v: k for k, v in _PRIMITIVES.items()}


def check_supported_type(name: str, t: pa.DataType) -> None:
    try:
        _type_to_json(t)
    except UnsupportedType as exc:
        raise UnsupportedType(f"column {name!r}: {exc}") from None


def _type_to_json(t: pa.DataType) -> dict[str, Any]:
    if t in _PRIMITIVE_NAMES:
        return {"type": _PRIMITIVE_NAMES[t]}
    if pa.types.is_timestamp(t):
        return {"type": "timestamp", "unit": t.unit, "tz": t.tz}
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        return {"type": "time", "unit": t.unit}
    if pa.types.is_decimal128(t):
        return {"type": "decimal", "precision": t.precision, "scale": t.scale}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "large_list" if pa.types.is_large_list(t) else "list",
                "item": _field_to_json(t.value_field)}
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_field_to_json(t.field(i)) for i in range(t.num_fields)]}
    hint = " (decode it first: table.cast() to the value type)" if pa.types.is_dictionary(t) else \
        " (Polars' layout of strings and bytes: declare the column string or binary)" \
        if t in (pa.string_view(), pa.binary_view()) else ""
    raise UnsupportedType(f"type {t} cannot be stored{hint}; use bool, integers, floats, string, binary, "
                          "date32, time, timestamp, decimal128, list or struct")


def _type_from_json(obj: Mapping[str, Any]) -> pa.DataType:
    kind = obj["type"]
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "timestamp":
        return pa.timestamp(obj["unit"], tz=obj.get("tz"))
    if kind == "time":
        unit = obj["unit"]
        return pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)
    if kind == "decimal":
        return pa.decimal128(obj["precision"], obj["scale"])
    if kind in ("list", "large_list"):
        item = _field_from_json(obj["item"])
        return pa.large_list(item) if kind == "large_list" else pa.list_(item)
    if kind == "struct":
        return pa.struct([_field_from_json(f) for f in obj["fields"]])
    raise ValueError(f"unknown type {kind!r}")


def _field_to_json(f: pa.Field) -> dict[str, Any]:
    fid = field_id(f)
    return {"name": f.name, "nullable": f.nullable, **({"id": fid} if fid is not None else {}),
            **_type_to_json(f.type)}


def _field_from_json(obj: Mapping[str, Any]) -> pa.Field:
    f = pa.field(obj["name"], _type_from_json(obj), nullable=bool(obj.get("nullable", True)))
    return with_field_id(f, int(obj["id"])) if "id" in obj else f


def schema_to_json(schema: pa.Schema) -> list[dict[str, Any]]:
    return [_field_to_json(f) for f in schema]


def schema_from_json(fields: Sequence[Mapping[str, Any]]) -> pa.Schema:
    return pa.schema([_field_from_json(f) for f in fields])
