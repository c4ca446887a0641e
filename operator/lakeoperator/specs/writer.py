"""LakeWriter: its spec's fields and defaults (the API contract; crds/weir.dev_lakewriters.yaml declares the
same), and `parse_lake_writer`, which checks again the cross-field rules the CRD states in CEL.

Must not: talk to Kubernetes, import kopf, read storage, or decide anything (planners in `plan/` do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from lakecore.config import did_you_mean
from lakeoperator.specs.common import (
    SPARK_FIELDS,
    Fields,
    NameRef,
    SparkSpec,
    SpecError,
    name_ref,
    parse_spark,
    parse_spec,
)
from lakeoperator.specs.kafka import KAFKA_FIELDS, KafkaSourceSpec, parse_kafka
from sparkjobs.contract import FILE_FORMATS, OPERATIONS

WriterMode = Literal["streaming", "batch"]
Operation = Literal["upsert", "insert", "bulk_insert", "delete", "insert_overwrite", "insert_overwrite_table"]
RestartType = Literal["Never", "OnFailure", "Always"]
OnConflict = Literal["Restart", "Abort"]
DesiredState = Literal["Running", "Suspended"]

assert set(get_args(Operation)) == set(OPERATIONS)


@dataclass(frozen=True)
class SourceSpec:
    format: str = "parquet"
    path: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    table: NameRef | None = None           # read a Weir table incrementally
    kafka: KafkaSourceSpec | None = None   # read Kafka topics


@dataclass(frozen=True)
class TriggerSpec:
    interval_seconds: float = 60
    available_now: bool = False


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
    spark: SparkSpec = field(default_factory=SparkSpec)
    restart_policy: RestartPolicySpec = RestartPolicySpec()
    start_timeout_seconds: float = 300
    ready_timeout_seconds: float = 600
    state: DesiredState = "Running"
    restart_nonce: str | None = None


WRITER_FIELDS = ("tableRef", "mode", "source", "operation", "columnGroup", "trigger", "spark",
                 "restartPolicy", "startTimeoutSeconds", "readyTimeoutSeconds", "state", "restartNonce")


def parse_lake_writer(body: Mapping[str, Any]) -> LakeWriterSpec:
    """A LakeWriter body -> LakeWriterSpec (defaults applied); SpecError if invalid (misspelt fields told
    with the first other mistake)."""
    return parse_spec(body, WRITER_FIELDS, _lake_writer)


def _lake_writer(f: Fields) -> LakeWriterSpec:
    s = f.sub("source", ("format", "path", "options", "table", "kafka"))
    given = [s.has("path"), s.has("table"), s.has("kafka")].count(True)
    if given != 1:
        raise SpecError(f.at("source"), "needs exactly one of path (files), table (a Weir table, read "
                        "incrementally) or kafka (topics); set one",
                        stand_in={s.at("path"): "missing"} if given == 0 else None)
    source_format = str(s.text("format", "parquet"))
    meant = did_you_mean([source_format], FILE_FORMATS) if source_format not in FILE_FORMATS else ""
    if meant:   # a format a package adds stays allowed; one close to Spark's own is a typo
        raise SpecError(s.at("format"), f"{source_format!r} is not a file format Spark reads{meant}; use one "
                        f"of {', '.join(FILE_FORMATS)} (or a package's, named in spark.conf)")
    source = SourceSpec(format=source_format, path=s.text("path", None),
                        options=s.string_map("options"),
                        table=name_ref(s, "table") if s.has("table") else None,
                        kafka=parse_kafka(s.sub("kafka", KAFKA_FIELDS)) if s.has("kafka") else None)
    mode = f.enum("mode", WriterMode)
    if mode == "batch" and f.has("trigger"):
        raise SpecError(f.at("trigger"), "is for streaming writers; a batch writer writes its input once: "
                        "remove trigger or use mode streaming")
    t = f.sub("trigger", ("intervalSeconds", "availableNow"))
    if t.has("intervalSeconds") and t.flag("availableNow", False):
        raise SpecError(f.at("trigger"), "takes intervalSeconds or availableNow, not both; drop one")
    r = f.sub("restartPolicy", ("type", "onConflict", "maxRestarts", "maxInfraRestarts", "backoff",
                                "resetAfterSeconds"))
    restart_type = r.enum("type", RestartType, "OnFailure")
    if mode == "batch" and restart_type == "Always":
        raise SpecError(r.at("type"), "Always would write a batch input again after it succeeded: use "
                        "OnFailure or Never for a batch writer")
    b = r.sub("backoff", ("initialSeconds", "maxSeconds", "factor"))
    backoff = BackoffSpec(initial_seconds=b.number("initialSeconds", 10, exclusive=True),
                          max_seconds=b.number("maxSeconds", 300, exclusive=True),
                          factor=b.number("factor", 2, minimum=1.0))
    if backoff.max_seconds < backoff.initial_seconds:
        raise SpecError(b.at("maxSeconds"), f"({backoff.max_seconds:g}) is below initialSeconds "
                        f"({backoff.initial_seconds:g}); raise it")
    return LakeWriterSpec(
        table_ref=name_ref(f, "tableRef"), mode=mode, source=source,
        operation=f.enum("operation", Operation, "upsert"), column_group=f.text("columnGroup", None),
        trigger=TriggerSpec(interval_seconds=t.number("intervalSeconds", 60, exclusive=True),
                            available_now=t.flag("availableNow", False)),
        spark=parse_spark(f.sub("spark", SPARK_FIELDS)),
        restart_policy=RestartPolicySpec(
            type=restart_type, on_conflict=r.enum("onConflict", OnConflict, "Restart"),
            max_restarts=r.integer("maxRestarts", 5), max_infra_restarts=r.integer("maxInfraRestarts", 10),
            backoff=backoff, reset_after_seconds=r.number("resetAfterSeconds", 600, exclusive=True)),
        start_timeout_seconds=f.number("startTimeoutSeconds", 300, exclusive=True),
        ready_timeout_seconds=f.number("readyTimeoutSeconds", 600, exclusive=True),
        state=f.enum("state", DesiredState, "Running"), restart_nonce=f.text("restartNonce", None))
