"""Raw custom-resource bodies -> frozen typed specs, with the API's defaults applied.

Owns: the field names and defaults of LakeTable, LakeWriter and TableService (the API contract; the CRDs
in crds/ declare the same), the cross-field rules the CRDs state in CEL (checked again here, because the
local runner reads manifests that no API server validated), `SpecError` and `ObjectRef`.

Must not: talk to Kubernetes, import kopf, read storage, or decide anything (planners in `plan/` do).
A body is parsed once, at the handler edge; everything after works on these values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args

from croniter import croniter

from lakecore.config import ColumnGroup, column_group_problem
from sparkjobs.contract import OPERATIONS, PUBLIC_STORAGE_OPTIONS, SERVICES

PAUSED_ANNOTATION = "weir.dev/paused"
MANAGED_ANNOTATION = "weir.dev/managed"

TableType = Literal["merge_on_read", "copy_on_write"]
ConcurrencyMode = Literal["optimistic", "non_blocking"]
EarlyDetectionStrategy = Literal["none", "direct", "direct_zk", "marker_service"]
LockProvider = Literal["storage", "zookeeper"]
DeletionPolicy = Literal["Retain", "Delete"]
WriterMode = Literal["streaming", "batch"]
Operation = Literal["upsert", "insert", "bulk_insert", "delete", "insert_overwrite", "insert_overwrite_table"]
SparkMode = Literal["kubernetes", "local"]
RestartType = Literal["Never", "OnFailure", "Always"]
OnConflict = Literal["Restart", "Abort"]
DesiredState = Literal["Running", "Suspended"]
ServiceType = Literal["compaction", "clustering", "clean", "archival"]
ConcurrencyPolicy = Literal["Forbid"]

# the column types a LakeTable schema takes (lakecore's table.json type names, timestamps with a unit)
PRIMITIVE_TYPES = ("int8", "int16", "int32", "int64", "float32", "float64", "bool", "string", "binary",
                   "date32", "timestamp_ms", "timestamp_us")
DECIMAL_TYPE = re.compile(r"decimal128\((\d+),\s*(\d+)\)")

assert set(get_args(Operation)) == set(OPERATIONS)
assert set(get_args(ServiceType)) == set(SERVICES)


class SpecError(ValueError):
    """A resource's spec is invalid: `field_path` names the field, the message ends with the fix."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}")
        self.field_path = field_path
        self.message = message


@dataclass(frozen=True)
class ObjectRef:
    """Who a spec belongs to: identity, the generation parsed, and the operator's annotations."""

    namespace: str
    name: str
    uid: str
    generation: int
    paused: bool = False       # weir.dev/paused: "true": reconciliation stops (ReconciliationPaused)
    managed: bool = True       # weir.dev/managed: "false": the operator leaves it and its table alone

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ObjectRef:
        meta = body.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        return cls(namespace=str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""),
                   uid=str(meta.get("uid") or ""), generation=int(meta.get("generation") or 0),
                   paused=str(annotations.get(PAUSED_ANNOTATION, "")).lower() == "true",
                   managed=str(annotations.get(MANAGED_ANNOTATION, "true")).lower() != "false")


# -- LakeTable ---------------------------------------------------------------------------------


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
class ZookeeperSpec:
    connect: str
    path: str | None = None
    credentials_secret: ZookeeperCredentialsRef | None = None


@dataclass(frozen=True)
class LockSpec:
    provider: LockProvider = "storage"
    zookeeper: ZookeeperSpec | None = None


@dataclass(frozen=True)
class HeartbeatSpec:
    interval_seconds: float = 10
    tolerable_misses: int = 3


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
    lock: LockSpec = LockSpec()
    heartbeat: HeartbeatSpec = HeartbeatSpec()
    tombstone_retention_hours: float | None = None
    deletion_policy: DeletionPolicy = "Retain"


# -- LakeWriter --------------------------------------------------------------------------------


@dataclass(frozen=True)
class NameRef:
    name: str


@dataclass(frozen=True)
class SourceSpec:
    format: str = "parquet"
    path: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    table: NameRef | None = None           # read a Weir table incrementally


@dataclass(frozen=True)
class TriggerSpec:
    interval_seconds: float = 60
    available_now: bool = False


@dataclass(frozen=True)
class DriverResources:
    cores: int = 1
    memory: str = "1g"


@dataclass(frozen=True)
class ExecutorResources:
    instances: int = 2
    cores: int = 1
    memory: str = "2g"


@dataclass(frozen=True)
class SparkSpec:
    mode: SparkMode = "kubernetes"
    image: str | None = None
    service_account_name: str | None = None
    driver: DriverResources = DriverResources()
    executor: ExecutorResources = ExecutorResources()
    conf: Mapping[str, str] = field(default_factory=dict)
    local_cores: int = 2


@dataclass(frozen=True)
class BackoffSpec:
    initial_seconds: float = 10
    max_seconds: float = 300
    factor: float = 2


@dataclass(frozen=True)
class RestartPolicySpec:
    type: RestartType = "OnFailure"
    on_conflict: OnConflict = "Restart"
    max_restarts: int = 5            # budget for failures (exit 1)
    max_infra_restarts: int = 10     # budget for infrastructure causes (eviction, OOM, start timeout, ...)
    backoff: BackoffSpec = BackoffSpec()
    reset_after_seconds: float = 600  # a run stable this long resets the budgets


@dataclass(frozen=True)
class LakeWriterSpec:
    table_ref: NameRef
    mode: WriterMode
    source: SourceSpec
    operation: Operation = "upsert"
    column_group: str | None = None
    trigger: TriggerSpec = TriggerSpec()
    spark: SparkSpec = SparkSpec()
    restart_policy: RestartPolicySpec = RestartPolicySpec()
    start_timeout_seconds: float = 300
    ready_timeout_seconds: float = 600
    state: DesiredState = "Running"
    restart_nonce: str | None = None


# -- TableService ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServiceTriggerSpec:
    after_delta_commits: int


@dataclass(frozen=True)
class ServicePolicySpec:
    """Maps to sparkjobs.contract.TableServiceArgs (same defaults)."""

    compaction_strategy: str = "all"
    clustering_strategy: str = "small_files"
    sort_columns: tuple[str, ...] = ()
    clean_policy: str = "keep_latest_commits"
    clean_retained: int | None = None
    archive_min_instants: int = 20
    archive_max_instants: int = 30


@dataclass(frozen=True)
class TableServiceSpec:
    table_ref: NameRef
    type: ServiceType
    schedule: str | None = None                    # cron, UTC
    trigger: ServiceTriggerSpec | None = None      # exactly one of schedule / trigger
    policy: ServicePolicySpec = ServicePolicySpec()
    spark: SparkSpec = SparkSpec()
    concurrency_policy: ConcurrencyPolicy = "Forbid"
    suspend: bool = False
    successful_runs_history_limit: int = 3
    failed_runs_history_limit: int = 3


# -- parsing -----------------------------------------------------------------------------------

T = TypeVar("T")


class _Fields:
    """Reads one object of a body; every error names the field's full path."""

    def __init__(self, obj: Any, path: str, known: tuple[str, ...]) -> None:
        if obj is None:
            obj = {}
        if not isinstance(obj, Mapping):
            raise SpecError(path, f"must be an object, got {type(obj).__name__}; see the CRD's schema")
        unknown = sorted(set(obj) - set(known))
        if unknown:
            raise SpecError(f"{path}.{unknown[0]}", f"unknown field; the fields here are {', '.join(known)} "
                            "(check the spelling: camelCase)")
        self.obj = obj
        self.path = path

    def at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def has(self, key: str) -> bool:
        return self.obj.get(key) is not None

    def raw(self, key: str) -> Any:
        return self.obj.get(key)

    def required(self, key: str) -> Any:
        if self.obj.get(key) is None:
            raise SpecError(self.at(key), "is required; set it")
        return self.obj[key]

    def text(self, key: str, default: T) -> str | T:
        value = self.obj.get(key)
        if value is None:
            return default
        if not isinstance(value, str) or not value:
            raise SpecError(self.at(key), f"must be a non-empty string, got {value!r}")
        return value

    def req_str(self, key: str) -> str:
        self.required(key)
        return str(self.text(key, ""))

    def integer(self, key: str, default: int, *, minimum: int = 0) -> int:
        value = self.obj.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise SpecError(self.at(key), f"must be an integer >= {minimum}, got {value!r}")
        return value

    def opt_int(self, key: str, *, minimum: int = 0) -> int | None:
        return self.integer(key, 0, minimum=minimum) if self.has(key) else None

    def number(self, key: str, default: float, *, minimum: float = 0.0, exclusive: bool = False) -> float:
        value = self.obj.get(key, default)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and \
            (value > minimum if exclusive else value >= minimum)
        if not ok:
            bound = f"> {minimum}" if exclusive else f">= {minimum}"
            raise SpecError(self.at(key), f"must be a number {bound}, got {value!r}")
        return float(value)

    def opt_number(self, key: str) -> float | None:
        return self.number(key, 0.0) if self.has(key) else None

    def flag(self, key: str, default: bool) -> bool:
        value = self.obj.get(key, default)
        if not isinstance(value, bool):
            raise SpecError(self.at(key), f"must be true or false, got {value!r}")
        return value

    def enum(self, key: str, choices: Any, default: str | None = None) -> Any:
        allowed = get_args(choices)
        value = self.obj.get(key, default)
        if value is None:
            raise SpecError(self.at(key), f"is required; use one of {', '.join(allowed)}")
        if value not in allowed:
            raise SpecError(self.at(key), f"{value!r} is not one of {', '.join(allowed)}; use one of them")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.obj.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise SpecError(self.at(key), f"must be a list of non-empty strings, got {value!r}")
        if len(set(value)) != len(value):
            raise SpecError(self.at(key), f"lists a name twice ({value!r}); list each once")
        return tuple(value)

    def string_map(self, key: str) -> dict[str, str]:
        value = self.obj.get(key) or {}
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            raise SpecError(self.at(key), "must be a map of strings to strings; quote numbers and booleans")
        return {str(k): v for k, v in value.items()}

    def sub(self, key: str, known: tuple[str, ...]) -> _Fields:
        return _Fields(self.obj.get(key), self.at(key), known)


def _spec_of(body: Mapping[str, Any]) -> Any:
    spec = body.get("spec")
    if spec is None:
        raise SpecError("spec", "is missing; a resource needs a spec")
    return spec


def parse_lake_table(body: Mapping[str, Any]) -> LakeTableSpec:
    """A LakeTable body -> LakeTableSpec (defaults applied); SpecError if invalid."""
    f = _Fields(_spec_of(body), "spec", (
        "location", "storage", "schema", "recordKey", "partitionFields", "tableType", "buckets",
        "orderingField", "columnGroups", "concurrency", "lock", "heartbeat", "tombstoneRetentionHours",
        "deletionPolicy"))
    schema = _parse_schema(f.required("schema"), f.at("schema"))
    names = [c.name for c in schema]
    record_key = f.strings("recordKey")
    if not record_key:
        raise SpecError(f.at("recordKey"), "is required: list the columns that identify a record")
    partition_fields = f.strings("partitionFields")
    for key, cols in (("recordKey", record_key), ("partitionFields", partition_fields)):
        _columns_exist(cols, names, f.at(key))
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
    lock = _parse_lock(f.sub("lock", ("provider", "zookeeper")))
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
    return LakeTableSpec(
        location=f.req_str("location"), schema=schema, record_key=record_key,
        storage=_parse_storage(f.sub("storage", ("secretRef", "options"))),
        partition_fields=partition_fields, table_type=table_type,
        buckets=f.integer("buckets", 4, minimum=1), ordering_field=ordering_field, column_groups=groups,
        concurrency=concurrency, lock=lock,
        heartbeat=HeartbeatSpec(interval_seconds=hb.number("intervalSeconds", 10, exclusive=True),
                                tolerable_misses=hb.integer("tolerableMisses", 3, minimum=1)),
        tombstone_retention_hours=f.opt_number("tombstoneRetentionHours"),
        deletion_policy=f.enum("deletionPolicy", DeletionPolicy, "Retain"))


def _columns_exist(cols: tuple[str, ...], names: list[str], path: str) -> None:
    missing = [c for c in cols if c not in names]
    if missing:
        raise SpecError(path, f"names column(s) {', '.join(missing)} that spec.schema lacks; add them to "
                        "the schema or fix the names")


def _parse_schema(raw: Any, path: str) -> tuple[ColumnSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise SpecError(path, "must be a non-empty list of {name, type, nullable}")
    out: list[ColumnSpec] = []
    for i, item in enumerate(raw):
        c = _Fields(item, f"{path}[{i}]", ("name", "type", "nullable"))
        type_name, name = c.req_str("type"), c.req_str("name")
        decimal = DECIMAL_TYPE.fullmatch(type_name)
        if type_name not in PRIMITIVE_TYPES and not (decimal and 1 <= int(decimal.group(1)) <= 38):
            raise SpecError(c.at("type"), f"{type_name!r} is not a column type; use one of "
                            f"{', '.join(PRIMITIVE_TYPES)} or decimal128(precision,scale), precision 1-38")
        if name.startswith("_weir_"):
            raise SpecError(c.at("name"), "names starting with _weir_ are reserved for Weir's own metadata "
                            "columns; rename the column")
        out.append(ColumnSpec(name=name, type=type_name, nullable=c.flag("nullable", True)))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise SpecError(path, "names a column twice; give each column one entry")
    return tuple(out)


def _parse_groups(raw: Any, path: str, names: list[str]) -> tuple[ColumnGroupSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError(path, "must be a list of {name, orderingField, columns}")
    groups = []
    for i, item in enumerate(raw):
        g = _Fields(item, f"{path}[{i}]", ("name", "orderingField", "columns"))
        group = ColumnGroupSpec(name=g.req_str("name"), ordering_field=g.req_str("orderingField"),
                                columns=g.strings("columns"))
        if "__" in group.name:
            raise SpecError(g.at("name"), "must not contain '__' (it separates names in Weir's metadata "
                            "columns); rename the group")
        _columns_exist((group.ordering_field, *group.columns), names, g.path)
        groups.append(group)
    return tuple(groups)


def _parse_storage(f: _Fields) -> StorageSpec:
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


def _parse_concurrency(f: _Fields) -> ConcurrencySpec:
    ed = f.sub("earlyDetection", ("strategy", "checkCommits", "periodSeconds"))
    return ConcurrencySpec(
        mode=f.enum("mode", ConcurrencyMode, "optimistic"),
        early_detection=EarlyDetectionSpec(
            strategy=ed.enum("strategy", EarlyDetectionStrategy, "none"),
            check_commits=ed.flag("checkCommits", True),
            period_seconds=ed.number("periodSeconds", 0.2, exclusive=True)))


def _parse_lock(f: _Fields) -> LockSpec:
    provider = f.enum("provider", LockProvider, "storage")
    zk = None
    if f.has("zookeeper"):
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
        zk = ZookeeperSpec(connect=connect, path=z.text("path", None), credentials_secret=credentials)
    if provider == "zookeeper" and zk is None:
        raise SpecError(f.at("zookeeper.connect"), "is required with provider zookeeper; set it")
    if provider != "zookeeper" and zk is not None:
        raise SpecError(f.at("zookeeper"), f"is only for provider zookeeper, not {provider}; drop it")
    return LockSpec(provider=provider, zookeeper=zk)


def parse_lake_writer(body: Mapping[str, Any]) -> LakeWriterSpec:
    """A LakeWriter body -> LakeWriterSpec (defaults applied); SpecError if invalid."""
    f = _Fields(_spec_of(body), "spec", (
        "tableRef", "mode", "source", "operation", "columnGroup", "trigger", "spark", "restartPolicy",
        "startTimeoutSeconds", "readyTimeoutSeconds", "state", "restartNonce"))
    s = f.sub("source", ("format", "path", "options", "table"))
    if not f.has("source") or s.has("path") == s.has("table"):
        raise SpecError(f.at("source"), "needs exactly one of path (files) or table (a Weir table, read "
                        "incrementally); set one")
    source = SourceSpec(format=str(s.text("format", "parquet")), path=s.text("path", None),
                        options=s.string_map("options"),
                        table=_name_ref(s, "table") if s.has("table") else None)
    t = f.sub("trigger", ("intervalSeconds", "availableNow"))
    if t.has("intervalSeconds") and t.flag("availableNow", False):
        raise SpecError(f.at("trigger"), "takes intervalSeconds or availableNow, not both; drop one")
    r = f.sub("restartPolicy", ("type", "onConflict", "maxRestarts", "maxInfraRestarts", "backoff",
                                "resetAfterSeconds"))
    b = r.sub("backoff", ("initialSeconds", "maxSeconds", "factor"))
    backoff = BackoffSpec(initial_seconds=b.number("initialSeconds", 10, exclusive=True),
                          max_seconds=b.number("maxSeconds", 300, exclusive=True),
                          factor=b.number("factor", 2, minimum=1.0))
    if backoff.max_seconds < backoff.initial_seconds:
        raise SpecError(b.at("maxSeconds"), f"({backoff.max_seconds:g}) is below initialSeconds "
                        f"({backoff.initial_seconds:g}); raise it")
    return LakeWriterSpec(
        table_ref=_name_ref(f, "tableRef"), mode=f.enum("mode", WriterMode), source=source,
        operation=f.enum("operation", Operation, "upsert"), column_group=f.text("columnGroup", None),
        trigger=TriggerSpec(interval_seconds=t.number("intervalSeconds", 60, exclusive=True),
                            available_now=t.flag("availableNow", False)),
        spark=_parse_spark(f.sub("spark", _SPARK_FIELDS)),
        restart_policy=RestartPolicySpec(
            type=r.enum("type", RestartType, "OnFailure"), on_conflict=r.enum("onConflict", OnConflict,
                                                                              "Restart"),
            max_restarts=r.integer("maxRestarts", 5), max_infra_restarts=r.integer("maxInfraRestarts", 10),
            backoff=backoff, reset_after_seconds=r.number("resetAfterSeconds", 600, exclusive=True)),
        start_timeout_seconds=f.number("startTimeoutSeconds", 300, exclusive=True),
        ready_timeout_seconds=f.number("readyTimeoutSeconds", 600, exclusive=True),
        state=f.enum("state", DesiredState, "Running"), restart_nonce=f.text("restartNonce", None))


def _name_ref(f: _Fields, key: str) -> NameRef:
    f.required(key)
    return NameRef(name=f.sub(key, ("name",)).req_str("name"))


_SPARK_FIELDS = ("mode", "image", "serviceAccountName", "driver", "executor", "conf", "localCores")


def _parse_spark(f: _Fields) -> SparkSpec:
    d = f.sub("driver", ("cores", "memory"))
    e = f.sub("executor", ("instances", "cores", "memory"))
    return SparkSpec(
        mode=f.enum("mode", SparkMode, "kubernetes"), image=f.text("image", None),
        service_account_name=f.text("serviceAccountName", None),
        driver=DriverResources(cores=d.integer("cores", 1, minimum=1), memory=str(d.text("memory", "1g"))),
        executor=ExecutorResources(instances=e.integer("instances", 2),
                                   cores=e.integer("cores", 1, minimum=1),
                                   memory=str(e.text("memory", "2g"))),
        conf=f.string_map("conf"), local_cores=f.integer("localCores", 2, minimum=1))


# the named schedules the CRD allows (croniter knows them)
CRON_ALIASES = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})


def parse_table_service(body: Mapping[str, Any]) -> TableServiceSpec:
    """A TableService body -> TableServiceSpec (defaults applied); SpecError if invalid."""
    f = _Fields(_spec_of(body), "spec", (
        "tableRef", "type", "schedule", "trigger", "policy", "spark", "concurrencyPolicy", "suspend",
        "successfulRunsHistoryLimit", "failedRunsHistoryLimit"))
    if f.has("schedule") == f.has("trigger"):
        raise SpecError(f.at("schedule"), "or trigger: exactly one is required (a cron schedule, or "
                        "trigger.afterDeltaCommits); set one")
    schedule = f.text("schedule", None)
    if schedule is not None and not ((schedule in CRON_ALIASES or len(schedule.split()) == 5)
                                     and croniter.is_valid(schedule)):
        raise SpecError(f.at("schedule"), f"{schedule!r} is not a cron schedule; use five fields "
                        "(minute hour day month weekday, UTC), e.g. '0 */6 * * *', or @hourly, @daily, "
                        "@weekly, @monthly, @yearly")
    trigger = None
    if f.has("trigger"):
        trigger = ServiceTriggerSpec(after_delta_commits=f.sub("trigger", ("afterDeltaCommits",)).integer(
            "afterDeltaCommits", 0, minimum=1))
    p = f.sub("policy", ("compactionStrategy", "clusteringStrategy", "sortColumns", "cleanPolicy",
                         "cleanRetained", "archiveMinInstants", "archiveMaxInstants"))
    policy = ServicePolicySpec(
        compaction_strategy=str(p.text("compactionStrategy", "all")),
        clustering_strategy=str(p.text("clusteringStrategy", "small_files")),
        sort_columns=p.strings("sortColumns"), clean_policy=str(p.text("cleanPolicy", "keep_latest_commits")),
        clean_retained=p.opt_int("cleanRetained"),
        archive_min_instants=p.integer("archiveMinInstants", 20, minimum=1),
        archive_max_instants=p.integer("archiveMaxInstants", 30, minimum=1))
    if policy.archive_min_instants >= policy.archive_max_instants:
        raise SpecError(p.at("archiveMaxInstants"), "must exceed archiveMinInstants; raise it")
    return TableServiceSpec(
        table_ref=_name_ref(f, "tableRef"), type=f.enum("type", ServiceType), schedule=schedule,
        trigger=trigger, policy=policy, spark=_parse_spark(f.sub("spark", _SPARK_FIELDS)),
        concurrency_policy=f.enum("concurrencyPolicy", ConcurrencyPolicy, "Forbid"),
        suspend=f.flag("suspend", False),
        successful_runs_history_limit=f.integer("successfulRunsHistoryLimit", 3),
        failed_runs_history_limit=f.integer("failedRunsHistoryLimit", 3))
