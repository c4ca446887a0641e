"""Argument dataclasses of every Spark job, with to/from argv.

Standard library only: the operator imports this module to build job commands and must not pull in pyspark
or the rest of sparkjobs (an import-linter contract enforces it).

Every field is one flag, `--field-name VALUE`: strings and numbers as they are, booleans as
true/false, mappings as a JSON object, tuples comma-separated. Fields left at their defaults are left
out of the command line, so commands stay short and readable in `kubectl describe`.

Storage options reach a job by reference only (`StorageArgs`): the name of an environment variable or
of a mounted file holding them as JSON. A command line is visible to anyone who can list pods, so it
carries no secret: literal storage options are limited to PUBLIC_STORAGE_OPTIONS.
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

# Spark's own file formats (Avro with the connector the image carries); a package may add others
FILE_FORMATS = ("parquet", "json", "csv", "orc", "avro", "text", "xml", "binaryFile")

# lakecore.write.OPERATIONS (this module imports nothing of lakecore; a test keeps the two equal)
OPERATIONS = ("upsert", "insert", "bulk_insert", "delete", "insert_overwrite", "insert_overwrite_table")
EARLY_DETECTION = ("direct", "direct_zk", "marker_service")
SERVICES = ("compaction", "clustering", "clean", "archival")
VALUE_FORMATS = ("json", "avro", "debezium")       # how a Kafka message's value decodes (sparkjobs.kafka)
BAD_RECORDS = ("fail", "skip", "deadLetter")       # what a message that does not decode does
ON_DATA_LOSS = ("fail", "skip")                    # what messages gone from Kafka before they were read do
STARTING_OFFSETS = ("earliest", "latest")
# Kafka consumer properties that hold secrets: never on a command line, only in --kafka-options-env
_SECRET_KAFKA_OPTION = re.compile(r"(password|jaas|secret|token|credential|\.key$|keystore\.key|"
                                  r"certificate|user\.info)", re.IGNORECASE)
# storage options that never hold a secret, so may be given literally on a command line
PUBLIC_STORAGE_OPTIONS = ("endpoint_url", "profile")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Exit codes of every job, for the operator's restart policy.
EXIT_OK = 0
EXIT_FAILED = 1          # anything else: retry with backoff
EXIT_BAD_INPUT = 2       # the input or the table's configuration is wrong: retrying does not help
EXIT_CONFLICT = 3        # lost a write conflict (early or at commit): restart after the winner commits
EXIT_BUSY = 4            # table services: another live run executes this service now: skip this run
EXIT_UNAVAILABLE = 5     # the source does not answer (no Kafka broker): back off, spending no budget

# the environment the operator gives a writer's driver: who it is (in the writer registry's entries)
WRITER_ENV = "WEIR_WRITER"                # "namespace/name" of the LakeWriter
SUBMISSION_ENV = "WEIR_SUBMISSION_ID"     # the submission the driver runs
POD_NAME_ENV = "WEIR_POD_NAME"            # the driver pod's name
PAUSE_ENV = "WEIR_TEST_PAUSE_DIR"         # a directory: a write's tasks hold there once their files are
                                          # written (sparkjobs.write.hold_if_asked; tests, and the demo)

A = TypeVar("A", bound="JobArgs")


class JobArgs:
    """to_argv / from_argv for a frozen dataclass of job arguments (see the module docstring)."""

    def to_argv(self) -> list[str]:
        argv: list[str] = []
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None or (f.default is not MISSING and value == f.default) or \
                    (f.default_factory is not MISSING and value == f.default_factory()):
                continue
            argv += [f"--{f.name.replace('_', '-')}", _encode(value)]
        return argv

    @classmethod
    def from_argv(cls: type[A], argv: list[str]) -> A:
        """Parse a command line; unknown flags or values that do not parse raise ValueError."""
        parser = _Parser(prog=cls.__name__, description=cls.__doc__, add_help=False)
        for f in fields(cls):  # type: ignore[arg-type]
            required = f.default is MISSING and f.default_factory is MISSING
            parser.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, required=required,
                                type=_decoder(str(f.type)), default=argparse.SUPPRESS)
        return cls(**vars(parser.parse_args(argv)))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # a ValueError for the caller, not sys.exit
        raise ValueError(f"{self.prog}: {message}")


def _encode(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def _decoder(annotation: str) -> Any:
    kind = annotation.replace(" | None", "").strip()
    if kind == "bool":
        return _boolean
    if kind == "int":
        return int
    if kind == "float":
        return float
    if kind.startswith("dict"):
        return _json_object
    if kind.startswith("tuple"):
        return lambda text: tuple(v for v in text.split(",") if v)
    return str


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def _json_object(text: str) -> dict[str, str]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return {str(k): str(v) for k, v in value.items()}


class InvalidJobArgs(ValueError):
    """A job argument has a value the job does not know (the job exits with EXIT_BAD_INPUT)."""


def _check_registry_url(url: str) -> None:
    """An http(s) URL without credentials in it (a command line is visible to anyone who lists pods)."""
    scheme, _, rest = url.partition("://")
    if "@" in rest.split("/", 1)[0]:   # not echoed: it holds a password
        raise ValueError("the schema registry URL must not carry credentials (user:password@); put them in "
                         "the Secret that --schema-registry-auth-env names")
    if scheme not in ("http", "https") or not rest or rest.startswith("/"):
        raise ValueError(f"the schema registry URL {url!r} is not an http:// or https:// URL")


def _one_of(what: str, value: str | None, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise InvalidJobArgs(f"{what} {value!r} is not one of {', '.join(allowed)}; fix the job's arguments "
                             "(the LakeWriter or TableService spec)")


@dataclass(frozen=True, kw_only=True)
class StorageArgs(JobArgs):
    """How a job finds its table's storage options (all by reference; see the module docstring).
    Every process of the job (driver and executors) reads the same variable or file itself."""

    storage_options_env: str | None = None       # env variable holding a JSON object of options
    storage_options_file: str | None = None      # JSON object file, e.g. a mounted Secret's key
    storage_options: dict[str, str] = field(default_factory=dict)  # PUBLIC_STORAGE_OPTIONS only

    def __post_init__(self) -> None:
        if self.storage_options_env is not None and not _ENV_NAME.fullmatch(self.storage_options_env):
            # the value is not echoed: it may be the options themselves, pasted by mistake
            raise ValueError("--storage-options-env takes the NAME of an environment variable (letters, "
                             "digits, _) that holds the options as JSON, not the options")
        if self.storage_options_file is not None and not self.storage_options_file.strip():
            raise ValueError("--storage-options-file takes the path of a JSON file; it is empty")
        secret = sorted(k for k in self.storage_options if k not in PUBLIC_STORAGE_OPTIONS)
        if secret:
            raise ValueError(f"storage option(s) {', '.join(secret)} may hold secrets and are not taken "
                             "on the command line (it is visible to anyone who can list pods); put them "
                             "in the JSON named by --storage-options-env or --storage-options-file")


@dataclass(frozen=True, kw_only=True)
class KafkaArgs(JobArgs):
    """A writer's Kafka source (sparkjobs.kafka): where, what, from where on, how values decode, what a
    message that does not decode does. Secrets (SASL, TLS) reach the job by reference only: a variable
    holding the consumer properties as JSON (`--kafka-options-env`)."""

    kafka_bootstrap_servers: str | None = None   # host:port,...; set: the source is Kafka, not --source
    kafka_topics: tuple[str, ...] = ()           # topics to read, or
    kafka_topic_pattern: str | None = None       # a Java regex of topics
    kafka_starting_offsets: str = "earliest"     # earliest | latest, for partitions no commit recorded
    kafka_max_offsets_per_trigger: int | None = None
    kafka_options: dict[str, str] = field(default_factory=dict)  # consumer properties, no secrets
    kafka_options_env: str | None = None         # env variable: JSON object of (secret) consumer properties
    value_format: str = "json"                   # json | avro | debezium
    avro_schema: str | None = None               # value_format avro: the writer's schema, inline JSON, or
    schema_registry_url: str | None = None       # a Confluent-compatible registry (Confluent wire format)
    schema_registry_auth_env: str | None = None  # env variable: the registry's "user:password" (basic auth)
    bad_records: str = "fail"                    # fail | skip | deadLetter
    dead_letter_topic: str | None = None         # deadLetter: a topic on the same brokers, or
    dead_letter_table: str | None = None         # a Weir table's URI (sparkjobs.kafka.dead_letter's schema)
    kafka_on_data_loss: str = "fail"             # fail | skip (go on at the oldest offset Kafka still holds)

    def __post_init__(self) -> None:
        if self.kafka_bootstrap_servers is None:
            return
        if bool(self.kafka_topics) == bool(self.kafka_topic_pattern):
            raise ValueError("a Kafka source reads topics or a topic pattern: set exactly one "
                             "(--kafka-topics, --kafka-topic-pattern)")
        _one_of("kafka starting offsets", self.kafka_starting_offsets, STARTING_OFFSETS)
        _one_of("value format", self.value_format, VALUE_FORMATS)
        _one_of("bad records policy", self.bad_records, BAD_RECORDS)
        _one_of("kafka on data loss", self.kafka_on_data_loss, ON_DATA_LOSS)
        if self.kafka_max_offsets_per_trigger is not None and self.kafka_max_offsets_per_trigger < 1:
            raise ValueError("kafka_max_offsets_per_trigger must be at least 1")
        if (self.value_format == "avro") != (bool(self.avro_schema) != bool(self.schema_registry_url)):
            raise ValueError("value format avro takes the values' Avro schema inline (--avro-schema) or from "
                             "a schema registry (--schema-registry-url), exactly one; other formats neither")
        if self.schema_registry_url is not None:
            _check_registry_url(self.schema_registry_url)
        if self.schema_registry_auth_env is not None and (
                not self.schema_registry_url or not _ENV_NAME.fullmatch(self.schema_registry_auth_env)):
            raise ValueError("--schema-registry-auth-env takes the NAME of an environment variable holding "
                             "the registry's user:password, with --schema-registry-url")
        if self.bad_records == "deadLetter" and bool(self.dead_letter_topic) == bool(self.dead_letter_table):
            raise ValueError("bad records policy deadLetter sends them to a topic or a table: set exactly "
                             "one (--dead-letter-topic, --dead-letter-table)")
        if self.kafka_options_env is not None and not _ENV_NAME.fullmatch(self.kafka_options_env):
            raise ValueError("--kafka-options-env takes the NAME of an environment variable that holds the "
                             "consumer properties as JSON, not the properties")
        secret = sorted(k for k in self.kafka_options if _SECRET_KAFKA_OPTION.search(k))
        if secret:
            raise ValueError(f"Kafka option(s) {', '.join(secret)} may hold secrets and are not taken on the "
                             "command line; put them in the JSON named by --kafka-options-env (a Secret)")


@dataclass(frozen=True)
class WriterArgs(KafkaArgs, StorageArgs):
    """What every writer job shares: the table, how to reach its lock, how to write, what it reads."""

    table: str                                   # table URI (local path, file://, s3://, memory://)
    source: str = ""                             # input path or URI, read with `source_format` (not Kafka)
    source_format: str = "parquet"               # parquet | json | csv | orc | any Spark source
    operation: str = "upsert"
    source_options: dict[str, str] = field(default_factory=dict)
    zookeeper: str | None = None                 # must name the table's recorded ZooKeeper lock; default: it
    early_detection: str | None = None           # direct | direct_zk | marker_service (OCC tables)
    max_rows_per_file: int | None = None         # roll files over (bounds an early abort's waste)
    marker_host: str | None = None               # marker service host for executors (spark.driver.host)
    marker_bind_host: str | None = None          # its listen address (spark.driver.bindAddress, else .host)
    extra: dict[str, str] = field(default_factory=dict)  # kept in the commit metadata
    column_group: str | None = None              # the column group this writer owns: only its columns
    heartbeat_interval_s: float | None = None    # the table's heartbeat (LakeTable spec.heartbeat), which
    heartbeat_misses: int | None = None          # its supervisor judges liveness by; default lakecore's

    def __post_init__(self) -> None:
        StorageArgs.__post_init__(self)
        KafkaArgs.__post_init__(self)
        if bool(self.source) == (self.kafka_bootstrap_servers is not None):
            raise ValueError("a writer reads --source (files) or a Kafka topic (--kafka-bootstrap-servers), "
                             "exactly one")
        _one_of("operation", self.operation, OPERATIONS)
        if self.heartbeat_interval_s is not None and not self.heartbeat_interval_s > 0:
            raise ValueError("heartbeat_interval_s must be > 0")
        if self.heartbeat_misses is not None and self.heartbeat_misses < 1:
            raise ValueError("heartbeat_misses must be at least 1")
        _one_of("early detection", self.early_detection, EARLY_DETECTION)
        if self.early_detection == "direct_zk" and not self.zookeeper:
            raise ValueError("early detection direct_zk needs --zookeeper (a connect string)")
        if self.max_rows_per_file is not None and self.max_rows_per_file < 1:
            raise ValueError("max_rows_per_file must be at least 1")


@dataclass(frozen=True)
class BatchWriteArgs(WriterArgs):
    """`sparkjobs.batch_write`: write one input (any Spark source) into a table as one instant."""

    app_name: str = "weir-batch-write"


@dataclass(frozen=True)
class StreamWriteArgs(WriterArgs):
    """`sparkjobs.stream_write`: a streaming writer, one micro-batch = one instant, exactly once.
    File sources (parquet, json, csv, orc) are read with the table's schema."""

    writer_id: str = ""                          # stable across restarts: makes micro-batches exactly once
    checkpoint: str = ""                         # Spark's checkpoint location for this writer
    trigger_seconds: float | None = None         # a micro-batch every N seconds (default: when data comes)
    available_now: bool = False                  # process what is there now, then stop (backfills, tests)
    max_files_per_trigger: int | None = None
    app_name: str = "weir-stream-write"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.writer_id or not self.checkpoint:
            raise ValueError("a streaming writer needs --writer-id and --checkpoint (both stable across "
                             "restarts)")
        if self.available_now and self.trigger_seconds is not None:
            raise ValueError("choose --trigger-seconds or --available-now, not both")


@dataclass(frozen=True)
class TableServiceArgs(StorageArgs):
    """`sparkjobs.table_service`: run one table service (pending work first, then what is due)."""

    table: str
    service: str                                 # compaction | clustering | clean | archival
    zookeeper: str | None = None                 # must name the table's recorded ZooKeeper lock; default: it
    compaction_strategy: str = "all"             # all | log_count | log_size | bounded_io
    clustering_strategy: str = "small_files"     # small_files | all
    sort_columns: tuple[str, ...] = ()           # clustering: sort each new base file by these
    clean_policy: str = "keep_latest_commits"    # keep_latest_commits | keep_latest_file_versions | ...
    clean_retained: int | None = None            # commits, versions or hours (per policy); None: default
    archive_min_instants: int = 20
    archive_max_instants: int = 30
    app_name: str = "weir-table-service"

    def __post_init__(self) -> None:
        super().__post_init__()
        _one_of("service", self.service, SERVICES)
        if not 0 < self.archive_min_instants < self.archive_max_instants:
            raise ValueError("archival needs 0 < archive_min_instants < archive_max_instants")
