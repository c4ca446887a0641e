"""TableService: its spec's fields and defaults (the API contract; crds/weir.dev_tableservices.yaml declares
the same), and `parse_table_service`, which checks again the rules the CRD states in CEL (one of schedule
or trigger, a cron schedule croniter and the API server both take).

Must not: talk to Kubernetes, import kopf, read storage, or decide anything (planners in `plan/` do).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from croniter import croniter

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
from sparkjobs.contract import SERVICES

ServiceType = Literal["compaction", "clustering", "clean", "archival"]
ConcurrencyPolicy = Literal["Forbid"]

assert set(get_args(ServiceType)) == set(SERVICES)


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
    spark: SparkSpec = field(default_factory=SparkSpec)
    concurrency_policy: ConcurrencyPolicy = "Forbid"
    suspend: bool = False
    successful_runs_history_limit: int = 3
    failed_runs_history_limit: int = 3


# the named schedules the CRD allows (croniter knows them)
CRON_ALIASES = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})


SERVICE_FIELDS = ("tableRef", "type", "schedule", "trigger", "policy", "spark", "concurrencyPolicy",
                  "suspend", "successfulRunsHistoryLimit", "failedRunsHistoryLimit")


def parse_table_service(body: Mapping[str, Any]) -> TableServiceSpec:
    """A TableService body -> TableServiceSpec (defaults applied); SpecError if invalid (misspelt fields
    told with the first other mistake)."""
    return parse_spec(body, SERVICE_FIELDS, _table_service)


def _table_service(f: Fields) -> TableServiceSpec:
    if f.has("schedule") == f.has("trigger"):
        raise SpecError(f.at("schedule"), "or trigger: exactly one is required (a cron schedule, or "
                        "trigger.afterDeltaCommits); set one",
                        stand_in=None if f.has("schedule") else {f.at("schedule"): "@daily"})
    schedule = f.text("schedule", None)
    if schedule is not None and not ((schedule in CRON_ALIASES or len(schedule.split()) == 5)
                                     and croniter.is_valid(schedule)):
        if len(schedule.split()) == 5:   # the fields are there: one's value is not
            raise SpecError(f.at("schedule"), f"{schedule!r} is not a cron schedule: a field's value is out "
                            "of its range or not cron's (minute 0-59, hour 0-23, day 1-31, month 1-12, "
                            "weekday 0-6; *, */N, a-b, a,b), e.g. '0 */6 * * *'")
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
    type_ = f.enum("type", ServiceType)
    for field_, for_type in (("sortColumns", "clustering"), ("cleanRetained", "clean")):
        if p.has(field_) and type_ != for_type:
            raise SpecError(p.at(field_), f"is for {for_type} services only (this one is {type_}); remove it")
    return TableServiceSpec(
        table_ref=name_ref(f, "tableRef"), type=type_, schedule=schedule,
        trigger=trigger, policy=policy, spark=parse_spark(f.sub("spark", SPARK_FIELDS)),
        concurrency_policy=f.enum("concurrencyPolicy", ConcurrencyPolicy, "Forbid"),
        suspend=f.flag("suspend", False),
        successful_runs_history_limit=f.integer("successfulRunsHistoryLimit", 3),
        failed_runs_history_limit=f.integer("failedRunsHistoryLimit", 3))

