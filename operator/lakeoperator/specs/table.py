"""LakeTable: its spec's fields and defaults (the API contract; crds/weir.dev_laketables.yaml declares the
same), and `parse_lake_table`, which checks again the cross-field rules the CRD states in CEL (the local
runner reads manifests that no API server validated).

Must not: talk to Kubernetes, import kopf, read storage, or decide anything (planners in `plan/` do).
A body is parsed once, at the handler edge; everything after works on these values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from lakecore.config import ColumnGroup, LockSpec, SettableCodec, column_group_problem, likely_type
from lakecore.errors import InvalidTableConfig
from lakecore.storage.open import location_problem
from lakeoperator.specs.common import Fields, SpecError, parse_spec, told_together
from sparkjobs.contract import PUBLIC_STORAGE_OPTIONS

TableType = Literal["merge_on_read", "copy_on_write"]
ConcurrencyMode = Literal["optimistic", "non_blocking"]
EarlyDetectionStrategy = Literal["none", "direct", "direct_zk", "marker_service"]
LockProvider = Literal["storage", "zookeeper"]
DeletionPolicy = Literal["Retain", "Delete"]
PublishFormat = Literal["iceberg", "delta"]
PublishView = Literal["snapshot", "read_optimized"]
CATALOG_TABLE = re.compile(r"[^.\s]+(\.[^.\s]+)+")

# the column types a LakeTable schema takes (lakecore's table.json type names, timestamps with a unit)
PRIMITIVE_TYPES = ("int8", "int16", "int32", "int64", "float32", "float64", "bool", "string", "binary",
                   "date32", "timestamp_ms", "timestamp_us")
DECIMAL_TYPE = re.compile(r"decimal128\((\d+),\s*(\d+)\)")


@dataclass(frozen=True)
class SecretKeyRef:
    name: str
    key: str


@dataclass(frozen=True)
class StorageSpec:
    secret_ref: SecretKeyRef | None = None
    options: Mapping[str, str] = field(default_factory=dict)   # PUBLIC_STORAGE_OPTIONS only


@dataclass(frozen=True)
class ColumnSpec:
    name: str
    type: str                  # one of PRIMITIVE_TYPES or decimal128(p,s)
    nullable: bool = True


@dataclass(frozen=True)
class ColumnGroupSpec:
    name: str
    ordering_field: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class EarlyDetectionSpec:
    strategy: EarlyDetectionStrategy = "none"
    check_commits: bool = True
    period_seconds: float = 0.2


@dataclass(frozen=True)
class ConcurrencySpec:
    mode: ConcurrencyMode = "optimistic"
    early_detection: EarlyDetectionSpec = EarlyDetectionSpec()


@dataclass(frozen=True)
class ZookeeperCredentialsRef:
    """The Secret holding a tenant's ZooKeeper digest credentials (referenced, never read)."""

    name: str
    username_key: str = "username"
    password_key: str = "password"


@dataclass(frozen=True)
class HeartbeatSpec:
    interval_seconds: float = 10
    tolerable_misses: int = 3


@dataclass(frozen=True)
class CatalogSpec:
    """spec.publish.catalog: where the published Iceberg table is registered. `secret_ref`: a Secret key
    holding a JSON object of pyiceberg catalog properties (read by the operator, never logged)."""

    table: str                 # NAMESPACE.TABLE
    secret_ref: SecretKeyRef
    name: str = "default"


@dataclass(frozen=True)
class PublishSpec:
    """spec.publish: the formats written beside the table after each commit (docs/interop.md)."""

    targets: tuple[PublishFormat, ...]
    view: PublishView | None = None      # None: lakecore's default (snapshot; read_optimized for groups)
    keep: int = 10
    catalog: CatalogSpec | None = None
    iceberg_format_version: int = 2      # publish.iceberg.formatVersion: 2, or 3 (deletion vectors)


@dataclass(frozen=True)
class LakeTableSpec:
    location: str
    schema: tuple[ColumnSpec, ...]
    record_key: tuple[str, ...]
    storage: StorageSpec = StorageSpec()
    partition_fields: tuple[str, ...] = ()
    table_type: TableType = "merge_on_read"
    buckets: int = 4
    ordering_field: str | None = None
    column_groups: tuple[ColumnGroupSpec, ...] = ()
    concurrency: ConcurrencySpec = ConcurrencySpec()
    # the lock table.json records, in lakecore's one form (a ZooKeeper path None: the table's default)
    lock: LockSpec = field(default_factory=LockSpec)
    lock_credentials: ZookeeperCredentialsRef | None = None   # lock.zookeeper.credentialsSecret
    heartbeat: HeartbeatSpec = HeartbeatSpec()
    tombstone_retention_hours: float | None = None
    compression: SettableCodec | None = None  # the codec of files written from now on (None: the table's own)
    deletion_policy: DeletionPolicy = "Retain"
    publish: PublishSpec | None = None


TABLE_FIELDS = ("location", "storage", "schema", "recordKey", "partitionFields", "tableType", "buckets",
                "orderingField", "columnGroups", "concurrency", "lock", "heartbeat",
                "tombstoneRetentionHours", "compression", "deletionPolicy", "publish")


def parse_lake_table(body: Mapping[str, Any]) -> LakeTableSpec:
    """A LakeTable body -> LakeTableSpec (defaults applied); SpecError if invalid (misspelt fields, the
    schema's mistakes and the record key's told at once)."""
    return parse_spec(body, TABLE_FIELDS, _lake_table)


def _record_key(f: Fields, names: Sequence[str] = ()) -> tuple[str, ...]:
    """spec.recordKey; `names`: the schema's columns, when known (one of them, not a partition field,
    stands in for a missing key while the rest of the spec is checked)."""
    record_key = f.strings("recordKey")
    if not record_key:
        partitions = f.raw("partitionFields")
        free = [n for n in names if not isinstance(partitions, list) or n not in partitions]
        raise SpecError(f.at("recordKey"), "is required: list the columns that identify a record",
                        stand_in={f.at("recordKey"): free[:1]} if free else None)
    return record_key


def _lake_table(f: Fields) -> LakeTableSpec:
    try:
        schema = _parse_schema(f.required("schema"), f.at("schema"))
    except SpecError as bad_schema:
        try:
            _record_key(f)
        except SpecError as bad_key:
            raise told_together(bad_schema, bad_key) from None
        raise
    names = [c.name for c in schema]
    record_key = _record_key(f, names)
    partition_fields = f.strings("partitionFields")
    for key, cols in (("recordKey", record_key), ("partitionFields", partition_fields)):
        _columns_exist(cols, names, f.at(key))
    both = [c for c in record_key if c in partition_fields]
    if both:
        raise SpecError(f.at("partitionFields"), f"names {', '.join(both)}, which recordKey names too: a "
                        "column is a key or a partition field, not both; drop it from one")
    ordering_field = f.text("orderingField", None)
    if ordering_field is not None:
        _columns_exist((ordering_field,), names, f.at("orderingField"))
    groups = _parse_groups(f.raw("columnGroups"), f.at("columnGroups"), names)
    if ordering_field is not None and groups:
        raise SpecError(f.at("columnGroups"), "and orderingField are exclusive: one ordering field for the "
                        "table, or one per column group; drop one")
    problem = column_group_problem(names, record_key, partition_fields,
                                   [ColumnGroup(g.name, g.columns, g.ordering_field) for g in groups]) \
        if groups else None
    if problem:  # as lakecore checks a table (the CRD's rules say the same where an API server runs them)
        raise SpecError(f.at("columnGroups"), problem)
    table_type = f.enum("tableType", TableType, "merge_on_read")
    concurrency = _parse_concurrency(f.sub("concurrency", ("mode", "earlyDetection")))
    lock, lock_credentials = _parse_lock(f.sub("lock", ("provider", "zookeeper")))
    if concurrency.mode == "non_blocking" and table_type != "merge_on_read":
        raise SpecError(f.at("concurrency.mode"), "non_blocking needs tableType merge_on_read; change one")
    strategy = concurrency.early_detection.strategy
    if strategy != "none" and concurrency.mode != "optimistic":
        raise SpecError(f.at("concurrency.earlyDetection.strategy"), f"{strategy} works with mode "
                        "optimistic only; set strategy none or mode optimistic")
    if strategy == "direct_zk" and lock.provider != "zookeeper":
        raise SpecError(f.at("concurrency.earlyDetection.strategy"), "direct_zk needs lock.provider "
                        "zookeeper; set the lock or choose another strategy")
    hb = f.sub("heartbeat", ("intervalSeconds", "tolerableMisses"))
    publish = _parse_publish(f.sub("publish", ("targets", "view", "keep", "catalog", "iceberg"))) \
        if f.has("publish") else None
    if publish is not None and groups and publish.view == "snapshot":
        raise SpecError(f.at("publish.view"), "a table with columnGroups publishes its last compacted state "
                        "only: set read_optimized or leave it unset")
    location = f.req_str("location")
    problem = location_problem(location)
    if problem is not None:   # a scheme no table can live on is no outage to retry
        raise SpecError(f.at("location"), problem)
    return LakeTableSpec(
        location=location, schema=schema, record_key=record_key,
        storage=_parse_storage(f.sub("storage", ("secretRef", "options"))),
        partition_fields=partition_fields, table_type=table_type,
        buckets=f.integer("buckets", 4, minimum=1), ordering_field=ordering_field, column_groups=groups,
        concurrency=concurrency, lock=lock, lock_credentials=lock_credentials,
        heartbeat=HeartbeatSpec(interval_seconds=hb.number("intervalSeconds", 10, exclusive=True),
                                tolerable_misses=hb.integer("tolerableMisses", 3, minimum=1)),
        tombstone_retention_hours=f.opt_number("tombstoneRetentionHours"),
        compression=f.enum("compression", SettableCodec) if f.has("compression") else None,
        deletion_policy=f.enum("deletionPolicy", DeletionPolicy, "Retain"), publish=publish)


def _columns_exist(cols: tuple[str, ...], names: list[str], path: str) -> None:
    missing = [c for c in cols if c not in names]
    if missing:
        raise SpecError(path, f"names column(s) {', '.join(missing)} that spec.schema lacks; add them to "
                        "the schema or fix the names")


def _parse_schema(raw: Any, path: str) -> tuple[ColumnSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise SpecError(path, "must be a non-empty list of {name, type, nullable}")
    out: list[ColumnSpec] = []
    bad: list[SpecError] = []
    for i, item in enumerate(raw):
        try:
            out.append(_column(Fields(item, f"{path}[{i}]", ("name", "type", "nullable"))))
        except SpecError as exc:   # every column's mistake, told at once
            bad.append(exc)
    if bad:
        raise told_together(*bad)
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise SpecError(path, "names a column twice; give each column one entry")
    return tuple(out)


def _column(c: Fields) -> ColumnSpec:
    type_name, name = c.req_str("type"), c.req_str("name")
    decimal = DECIMAL_TYPE.fullmatch(type_name)
    if type_name not in PRIMITIVE_TYPES and not (decimal and 1 <= int(decimal.group(1)) <= 38):
        likely = likely_type(type_name)
        raise SpecError(c.at("type"), f"{type_name!r} is not a column type"
                        + (f" (did you mean {likely}?)" if likely else "") + f"; use one of "
                        f"{', '.join(PRIMITIVE_TYPES)} or decimal128(precision,scale), precision 1-38")
    if name.startswith("_weir_"):
        raise SpecError(c.at("name"), "names starting with _weir_ are reserved for Weir's own metadata "
                        "columns; rename the column")
    return ColumnSpec(name=name, type=type_name, nullable=c.flag("nullable", True))


def _parse_groups(raw: Any, path: str, names: list[str]) -> tuple[ColumnGroupSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError(path, "must be a list of {name, orderingField, columns}")
    groups = []
    for i, item in enumerate(raw):
        g = Fields(item, f"{path}[{i}]", ("name", "orderingField", "columns"))
        group = ColumnGroupSpec(name=g.req_str("name"), ordering_field=g.req_str("orderingField"),
                                columns=g.strings("columns"))
        if "__" in group.name:
            raise SpecError(g.at("name"), "must not contain '__' (it separates names in Weir's metadata "
                            "columns); rename the group")
        _columns_exist((group.ordering_field, *group.columns), names, g.path)
        groups.append(group)
    return tuple(groups)


def _parse_storage(f: Fields) -> StorageSpec:
    secret = None
    if f.has("secretRef"):
        s = f.sub("secretRef", ("name", "key"))
        secret = SecretKeyRef(name=s.req_str("name"), key=s.req_str("key"))
    options = f.string_map("options")
    secretish = sorted(k for k in options if k not in PUBLIC_STORAGE_OPTIONS)
    if secretish:
        raise SpecError(f.at(f"options.{secretish[0]}"), f"may hold a secret and is not taken in a spec "
                        f"(only {', '.join(PUBLIC_STORAGE_OPTIONS)} are); put it in the Secret named by "
                        "storage.secretRef")
    return StorageSpec(secret_ref=secret, options=options)


def _parse_concurrency(f: Fields) -> ConcurrencySpec:
    ed = f.sub("earlyDetection", ("strategy", "checkCommits", "periodSeconds"))
    return ConcurrencySpec(
        mode=f.enum("mode", ConcurrencyMode, "optimistic"),
        early_detection=EarlyDetectionSpec(
            strategy=ed.enum("strategy", EarlyDetectionStrategy, "none"),
            check_commits=ed.flag("checkCommits", True),
            period_seconds=ed.number("periodSeconds", 0.2, exclusive=True)))


def _parse_lock(f: Fields) -> tuple[LockSpec, ZookeeperCredentialsRef | None]:
    """spec.lock -> lakecore's LockSpec (its own rules: a connect string, a path like /weir/locks/<table>)
    and the Secret with the tenant's ZooKeeper credentials, if named."""
    provider = f.enum("provider", LockProvider, "storage")
    if not f.has("zookeeper"):
        if provider == "zookeeper":
            raise SpecError(f.at("zookeeper.connect"), "is required with provider zookeeper; set it")
        return LockSpec(provider), None
    if provider != "zookeeper":
        raise SpecError(f.at("zookeeper"), f"is only for provider zookeeper, not {provider}; drop it")
    z = f.sub("zookeeper", ("connect", "path", "credentialsSecret"))
    connect = z.req_str("connect")
    if "@" in connect:
        raise SpecError(z.at("connect"), "must not carry credentials ('@'); give host:port[,host:port]"
                        "[/chroot] and name a Secret holding them in lock.zookeeper.credentialsSecret")
    credentials = None
    if z.has("credentialsSecret"):
        c = z.sub("credentialsSecret", ("name", "usernameKey", "passwordKey"))
        credentials = ZookeeperCredentialsRef(name=c.req_str("name"),
                                              username_key=c.text("usernameKey", "username"),
                                              password_key=c.text("passwordKey", "password"))
        if credentials.username_key == credentials.password_key:
            raise SpecError(c.at("passwordKey"), f"is the same key as usernameKey "
                            f"({credentials.username_key!r}); name the Secret's password key")
    path = z.text("path", None)
    try:
        return LockSpec("zookeeper", connect=connect, path=path), credentials
    except InvalidTableConfig as exc:   # lakecore's rules for a lock it records (so says the CRD's pattern)
        raise SpecError(z.at("path" if path is not None else "connect"), f"{exc}; fix it") from None


def _parse_publish(f: Fields) -> PublishSpec:
    targets = f.strings("targets")
    if not targets:
        raise SpecError(f.at("targets"), "is required: list iceberg, delta or both")
    for target in targets:
        if target not in get_args(PublishFormat):
            raise SpecError(f.at("targets"), f"{target!r} is not a format; use iceberg, delta or both")
    view = f.enum("view", PublishView) if f.has("view") else None
    catalog = None
    if f.has("catalog"):
        c = f.sub("catalog", ("table", "name", "secretRef"))
        table = c.req_str("table")
        if not CATALOG_TABLE.fullmatch(table):
            raise SpecError(c.at("table"), f"{table!r} must look like NAMESPACE.TABLE")
        c.required("secretRef")
        s = c.sub("secretRef", ("name", "key"))
        secret = SecretKeyRef(name=s.req_str("name"), key=s.req_str("key"))
        catalog = CatalogSpec(table=table, secret_ref=secret, name=c.text("name", "default"))
        if "iceberg" not in targets:
            raise SpecError(f.at("catalog"), "registers the Iceberg table: add iceberg to publish.targets "
                            "(a Delta table is read by its path)")
    version = 2
    if f.has("iceberg"):
        i = f.sub("iceberg", ("formatVersion",))
        version = i.integer("formatVersion", 2, minimum=2)
        if version not in (2, 3):
            raise SpecError(i.at("formatVersion"), f"{version} is not an Iceberg format version Weir "
                            "publishes; use 2 or 3")
        if "iceberg" not in targets:
            raise SpecError(f.at("iceberg"), "sets how the Iceberg table is published: add iceberg to "
                            "publish.targets")
    return PublishSpec(targets=targets, view=view, keep=f.integer("keep", 10, minimum=1),  # type: ignore[arg-type]
                       catalog=catalog, iceberg_format_version=version)
