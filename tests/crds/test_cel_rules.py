"""The CEL rules of the CRDs accept what they should and reject what they should, each with its message.

A table of cases: a body (and, for an update, the old body), and the rules it must violate (by the start of
their message; none: accepted). Every case is valid against the OpenAPI schema, so a rejection is the
rule's. A rule that raises instead of answering (a missing `has()`, a type mismatch) fails every case
that reaches it. The last test makes a rule without an accepting and a rejecting case fail the suite.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from lakeoperator.dev.crd_schema import apply_defaults, validation_errors
from tests.crds.cel import Outcome, Rule, evaluate, rules_of
from tests.crds.manifests import CRD_FILES, schema

DELETE: Any = object()

BASE: dict[str, dict[str, Any]] = {
    "LakeTable": {
        "location": "/lake/t",
        "schema": [{"name": "id", "type": "string", "nullable": False}, {"name": "v", "type": "string"},
                   {"name": "ts", "type": "int64"}, {"name": "day", "type": "date32"}],
        "recordKey": ["id"],
    },
    "LakeWriter": {"tableRef": {"name": "t"}, "mode": "batch", "source": {"path": "/in"}},
    "TableService": {"tableRef": {"name": "t"}, "type": "compaction", "schedule": "@hourly"},
}
GROUPED: dict[str, Any] = {
    "schema": [{"name": "id", "type": "string", "nullable": False}, {"name": "a", "type": "string"},
               {"name": "a_ts", "type": "int64"}, {"name": "b", "type": "string"},
               {"name": "b_ts", "type": "int64"}],
    "columnGroups": [{"name": "ga", "orderingField": "a_ts", "columns": ["a"]},
                     {"name": "gb", "orderingField": "b_ts", "columns": ["b"]}],
}
COLS = BASE["LakeTable"]["schema"]
GROUP_A, GROUP_B = GROUPED["columnGroups"]
NOTE = {"name": "note", "type": "string"}


def groups(a: list[str], b: list[str], *, extra: tuple[dict[str, Any], ...] = (), a_order: str = "a_ts",
           b_order: str = "b_ts") -> dict[str, Any]:
    """GROUPED with ga listing `a` and gb listing `b` (ordered by a_order, b_order), schema + `extra`."""
    return {"schema": [*GROUPED["schema"], *extra],
            "columnGroups": [{"name": "ga", "orderingField": a_order, "columns": a},
                             {"name": "gb", "orderingField": b_order, "columns": b}]}


ZK = {"provider": "zookeeper", "zookeeper": {"connect": "zk:2181/weir"}}
CATALOG = {"table": "lake.t", "secretRef": {"name": "catalog", "key": "properties"}}


def _merge(base: Any, patch: Any) -> Any:
    if not isinstance(patch, dict) or not isinstance(base, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(base)
    for k, v in patch.items():
        if v is DELETE:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


def body(kind: str, *patches: dict[str, Any]) -> dict[str, Any]:
    spec = BASE[kind]
    for p in patches:
        spec = _merge(spec, p)
    return {"apiVersion": "weir.dev/v1alpha1", "kind": kind, "metadata": {"name": "x"}, "spec": spec}


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    new: dict[str, Any]
    old: dict[str, Any] | None = None
    violates: tuple[str, ...] = ()


def table(id: str, *patches: dict[str, Any], old: tuple[dict[str, Any], ...] | None = None,
          violates: tuple[str, ...] = ()) -> Case:
    return _case("LakeTable", id, patches, old, violates)


KAFKA = {"bootstrapServers": "kafka:9092", "topics": ["events"]}


def kafka(**fields: Any) -> dict[str, Any]:
    """A writer patch: source.kafka with `fields`."""
    return {"source": {"path": DELETE, "kafka": {**KAFKA, **fields}}}


def writer(id: str, *patches: dict[str, Any], old: tuple[dict[str, Any], ...] | None = None,
           violates: tuple[str, ...] = ()) -> Case:
    return _case("LakeWriter", id, patches, old, violates)


def service(id: str, *patches: dict[str, Any], old: tuple[dict[str, Any], ...] | None = None,
            violates: tuple[str, ...] = ()) -> Case:
    return _case("TableService", id, patches, old, violates)


def _case(kind: str, id: str, patches: tuple[dict[str, Any], ...], old: tuple[dict[str, Any], ...] | None,
          violates: tuple[str, ...]) -> Case:
    old_body = None if old is None else body(kind, *old)
    return Case(f"{kind}:{id}", kind, body(kind, *patches), old_body, violates)


CASES = [
    # -- LakeTable: creation -------------------------------------------------------------------
    table("minimal"),
    table("ordering field in the schema", {"orderingField": "ts"}),
    table("ordering field not in the schema", {"orderingField": "nope"},
          violates=("orderingField must be a column of schema",)),
    table("column groups", GROUPED),
    table("column groups and an ordering field", GROUPED, {"orderingField": "a_ts"},
          violates=("set orderingField (one event-time order",)),
    table("group ordering field not in the schema", groups(["a", "a_ts"], ["b"], a_order="zz"),
          violates=("every column group's orderingField must be a column",)),
    table("a group listing its own ordering field", groups(["a", "a_ts"], ["b"])),
    table("an ordering field two groups share, in no group",
          groups(["a", "a_ts"], ["b", "b_ts"], extra=({"name": "ts", "type": "int64"},), a_order="ts",
                 b_order="ts")),
    table("an ordering field two groups share, listed by one",
          groups(["a", "a_ts", "ts"], ["b", "b_ts"], extra=({"name": "ts", "type": "int64"},), a_order="ts",
                 b_order="ts"),
          violates=("a column group lists another group's orderingField",)),
    table("a group listing a column not in the schema", groups(["a", "zz"], ["b"]),
          violates=("a column group lists a column that is not in schema",)),
    table("a group listing the record key", groups(["a", "id"], ["b"]),
          violates=("a column group lists a recordKey or partitionFields column",)),
    table("a group listing a partition field",
          groups(["a"], ["b", "day"], extra=({"name": "day", "type": "date32"},)),
          {"partitionFields": ["day"]},
          violates=("a column group lists a recordKey or partitionFields column",)),
    table("a column in two groups", groups(["a"], ["b", "a"]),
          violates=("a column is listed in two column groups",)),
    table("a group listing another group's ordering field", groups(["a"], ["b", "a_ts"]),
          violates=("a column group lists another group's orderingField",)),
    table("a data column in no group", groups(["a"], ["b"], extra=(NOTE,)),
          violates=("a data column (a schema column not in recordKey or partitionFields) is in no",)),
    table("a partition field in no group",
          groups(["a"], ["b"], extra=({"name": "day", "type": "date32"},)), {"partitionFields": ["day"]}),
    table("a group ordered by the record key", groups(["a", "a_ts"], ["b"], a_order="id"),
          violates=("a column group's own orderingField belongs to the group",)),
    table("groups sharing the record key as ordering field", groups(["a", "a_ts"], ["b", "b_ts"],
                                                                     a_order="id", b_order="id")),
    table("group name with a double underscore",
          _merge(GROUPED, {"columnGroups": [{"name": "g__a", "orderingField": "a_ts", "columns": ["a"]},
                                             GROUP_B]}),
          violates=("a column group name must not contain",)),
    table("record key not in the schema", {"recordKey": ["nope"]},
          violates=("every recordKey column must be a column",)),
    table("partition field in the schema", {"partitionFields": ["day"]}),
    table("partition field not in the schema", {"partitionFields": ["nope"]},
          violates=("every partitionFields column must be a column",)),
    table("record key also a partition field", {"partitionFields": ["id"]},
          violates=("a column cannot be both in recordKey",)),
    table("reserved column name", {"schema": [*COLS, {"name": "_weir_x", "type": "int64"}]},
          violates=("column names starting with _weir_",)),
    table("non-blocking on merge-on-read", {"concurrency": {"mode": "non_blocking"}}),
    table("non-blocking on copy-on-write",
          {"concurrency": {"mode": "non_blocking"}, "tableType": "copy_on_write"},
          violates=("concurrency.mode non_blocking needs",)),
    table("early detection with optimistic", {"concurrency": {"earlyDetection": {"strategy": "direct"}}}),
    table("early detection with non-blocking",
          {"concurrency": {"mode": "non_blocking", "earlyDetection": {"strategy": "direct"}}},
          violates=("earlyDetection is for optimistic concurrency",)),
    table("direct_zk with the zookeeper lock",
          {"concurrency": {"earlyDetection": {"strategy": "direct_zk"}}, "lock": ZK}),
    table("direct_zk with the storage lock", {"concurrency": {"earlyDetection": {"strategy": "direct_zk"}}},
          violates=("earlyDetection strategy direct_zk",)),
    # -- LakeTable: publishing -----------------------------------------------------------------
    table("publish both with a catalog", {"publish": {"targets": ["iceberg", "delta"], "catalog": CATALOG}}),
    table("publish delta with a catalog", {"publish": {"targets": ["delta"], "catalog": CATALOG}},
          violates=("publish.catalog registers the Iceberg table",)),
    table("publish column groups read-optimized", GROUPED,
          {"publish": {"targets": ["iceberg"], "view": "read_optimized"}}),
    table("publish column groups by default", GROUPED, {"publish": {"targets": ["delta"]}}),
    table("publish column groups merged", GROUPED, {"publish": {"targets": ["iceberg"], "view": "snapshot"}},
          violates=("a table with columnGroups publishes its last compacted state only",)),
    table("publish merged", {"publish": {"targets": ["iceberg"], "view": "snapshot"}}),
    table("publish iceberg v3", {"publish": {"targets": ["iceberg"], "iceberg": {"formatVersion": 3}}}),
    table("publish delta with an iceberg version", {"publish": {"targets": ["delta"],
                                                                "iceberg": {"formatVersion": 3}}},
          violates=("publish.iceberg sets how the Iceberg table is published",)),
    table("zookeeper lock without connect", {"lock": {"provider": "zookeeper"}},
          violates=("lock.provider zookeeper needs lock.zookeeper.connect",)),
    table("storage lock with a zookeeper block",
          {"lock": {"provider": "storage", "zookeeper": {"connect": "zk:2181"}}},
          violates=("lock.zookeeper is set but lock.provider is storage",)),
    table("credentials in the connect string", {"lock": {"provider": "zookeeper",
                                                          "zookeeper": {"connect": "user:pw@zk:2181"}}},
          violates=("lock.zookeeper.connect must not",)),
    table("public storage options",
          {"storage": {"options": {"endpoint_url": "http://s3:9000", "profile": "p"}}}),
    table("secret storage option", {"storage": {"options": {"aws_secret_access_key": "s"}}},
          violates=("storage.options takes only endpoint_url and profile",)),
    # -- LakeTable: updates ---------------------------------------------------------------------
    table("unchanged", GROUPED, {"partitionFields": []}, old=(GROUPED,)),
    table("a nullable column added", {"schema": [*COLS, {"name": "w", "type": "int32"}]},
          old=()),
    table("a non-nullable column added",
          {"schema": [*COLS, {"name": "w", "type": "int32", "nullable": False}]},
          old=(), violates=("a column added after creation must be nullable",)),
    table("a column removed", {"schema": COLS[:-1]}, old=(),
          violates=("columns cannot be removed from schema",)),
    table("a column retyped", {"schema": [*COLS[:-1], {"name": "day", "type": "string"}]},
          old=(), violates=("a column's type is immutable",)),
    table("a non-nullable column relaxed",
          {"schema": [{"name": "id", "type": "string"}, *COLS[1:]]}, old=()),
    table("a nullable column tightened",
          {"schema": [*COLS[:-1], {"name": "day", "type": "date32", "nullable": False}]},
          old=(), violates=("a nullable column cannot become non-nullable",)),
    table("location changed", {"location": "/lake/other"}, old=(), violates=("location is immutable",)),
    table("record key changed", {"recordKey": ["v"]}, old=(), violates=("recordKey is immutable",)),
    table("partition fields changed", {"partitionFields": ["day"]}, old=(),
          violates=("partitionFields are immutable",)),
    table("table type changed", {"tableType": "copy_on_write"}, old=(), violates=("tableType is immutable",)),
    table("buckets changed", {"buckets": 8}, old=(), violates=("buckets is immutable",)),
    table("ordering field set", {"orderingField": "ts"}, old=(), violates=("orderingField is immutable",)),
    table("ordering field changed", {"orderingField": "v"}, old=({"orderingField": "ts"},),
          violates=("orderingField is immutable",)),
    table("ordering field removed", old=({"orderingField": "ts"},), violates=("orderingField is immutable",)),
    table("column groups added", GROUPED, old=({"schema": GROUPED["schema"]},),
          violates=("columnGroups are immutable",)),
    table("a column group removed", _merge(GROUPED, {"columnGroups": [GROUP_A]}), old=(GROUPED,),
          violates=("columnGroups are immutable",
                    "a data column (a schema column not in recordKey or partitionFields) is in no")),
    table("a column group renamed",
          _merge(GROUPED, {"columnGroups": [GROUP_A,
                                             {"name": "gc", "orderingField": "b_ts", "columns": ["b"]}]}),
          old=(GROUPED,), violates=("columnGroups are immutable",)),
    table("a column group's ordering field changed",
          _merge(GROUPED, {"columnGroups": [
              GROUP_A, {"name": "gb", "orderingField": "a_ts", "columns": ["b", "b_ts"]}]}),
          old=(GROUPED,), violates=("a column group's orderingField is immutable",)),
    table("lock changed to zookeeper", {"lock": ZK}, old=()),
    # -- LakeTable: column groups of an existing table --------------------------------------------
    table("a nullable column added to a group", groups(["a", "note"], ["b"], extra=(NOTE,)), old=(GROUPED,)),
    table("a nullable column added in no group", groups(["a"], ["b"], extra=(NOTE,)), old=(GROUPED,),
          violates=("a data column (a schema column not in recordKey or partitionFields) is in no",)),
    table("a non-nullable column added to a group",
          groups(["a", "note"], ["b"], extra=({**NOTE, "nullable": False},)), old=(GROUPED,),
          violates=("a column added after creation must be nullable",)),
    table("a column moved to another group", groups(["note"], ["b", "a"], extra=(NOTE,)),
          old=(groups(["a", "note"], ["b"], extra=(NOTE,)),),
          violates=("a column never leaves its column group",)),
    table("a column dropped from its group", groups(["a"], ["b"], extra=(NOTE,)),
          old=(groups(["a", "note"], ["b"], extra=(NOTE,)),),
          violates=("a column never leaves its column group",
                    "a data column (a schema column not in recordKey or partitionFields) is in no")),
    table("a column dropped from its group and the schema", groups(["a"], ["b"]),
          old=(groups(["a", "note"], ["b"], extra=(NOTE,)),),
          violates=("a column never leaves its column group", "columns cannot be removed from schema")),
    table("a group's own ordering field no longer listed", groups(["a"], ["b"]),
          old=(groups(["a", "a_ts"], ["b"]),)),
    # -- LakeWriter -----------------------------------------------------------------------------
    writer("minimal"),
    writer("streaming with an interval", {"mode": "streaming", "trigger": {"intervalSeconds": 5}}),
    writer("streaming available now", {"mode": "streaming", "trigger": {"availableNow": True}}),
    writer("interval with availableNow false", {"mode": "streaming",
                                                "trigger": {"intervalSeconds": 5, "availableNow": False}}),
    writer("interval and availableNow",
           {"mode": "streaming", "trigger": {"intervalSeconds": 5, "availableNow": True}},
           violates=("trigger takes intervalSeconds or availableNow",)),
    writer("batch with a trigger", {"trigger": {"availableNow": True}},
           violates=("trigger is for streaming",)),
    writer("streaming restarted always", {"mode": "streaming", "restartPolicy": {"type": "Always"}}),
    writer("batch restarted always", {"restartPolicy": {"type": "Always"}},
           violates=("restartPolicy.type Always would write",)),
    writer("source table", {"source": {"path": DELETE, "table": {"name": "raw"}}}),
    writer("source path and table", {"source": {"table": {"name": "raw"}}},
           violates=("source needs exactly one of path",)),
    writer("source without path or table", {"source": {"path": DELETE, "format": "json"}},
           violates=("source needs exactly one of path",)),
    writer("source kafka", {"source": {"path": DELETE, "kafka": KAFKA}}),
    writer("source path and kafka", {"source": {"kafka": KAFKA}},
           violates=("source needs exactly one of path",)),
    writer("kafka topics and a pattern", kafka(topicPattern="a.*"),
           violates=("source.kafka needs exactly one of topics and topicPattern",)),
    writer("kafka options", kafka(options={"fetch.max.bytes": "1048576", "security.protocol": "SASL_SSL"})),
    writer("kafka secret option", kafka(options={"sasl.jaas.config": "x"}),
           violates=("source.kafka.options takes no secrets",)),
    writer("kafka avro without schema", kafka(value={"format": "avro"}),
           violates=("format avro takes exactly one of value.avroSchema",)),
    writer("kafka avro with schema", kafka(value={"format": "avro", "avroSchema": "{}"})),
    writer("kafka avro from a schema registry",
           kafka(value={"format": "avro", "schemaRegistry": {
               "url": "https://registry:8081", "credentialsSecretRef": {"name": "r", "key": "auth"}}})),
    writer("kafka avro from an inline schema and a registry",
           kafka(value={"format": "avro", "avroSchema": "{}", "schemaRegistry": {"url": "http://r:8081"}}),
           violates=("format avro takes exactly one of value.avroSchema",)),
    writer("kafka json from a registry", kafka(value={"format": "json", "schemaRegistry": {"url": "http://r"}}),
           violates=("format avro takes exactly one of value.avroSchema",)),
    writer("kafka registry URL with a password",
           kafka(value={"format": "avro", "schemaRegistry": {"url": "http://me:pw@r:8081"}}),
           violates=("schemaRegistry.url is an http:// or https:// URL",)),
    writer("kafka dead letters nowhere", kafka(badRecords={"policy": "deadLetter"}),
           violates=("badRecords.policy deadLetter",)),
    writer("kafka dead letters to a topic", kafka(badRecords={"policy": "deadLetter", "deadLetterTopic": "d"})
           ),
    writer("spark conf", {"spark": {"conf": {"spark.sql.shuffle.partitions": "4"}}}),
    writer("not a spark property", {"spark": {"conf": {"shuffle.partitions": "4"}}},
           violates=("spark.conf takes Spark properties",)),
    writer("backoff that shrinks", {"restartPolicy": {"backoff": {"initialSeconds": 400}}},
           violates=("restartPolicy.backoff.initialSeconds",)),
    writer("unchanged", {"state": "Suspended"}, old=()),
    writer("table changed", {"tableRef": {"name": "u"}}, old=(), violates=("tableRef is immutable",)),
    writer("mode changed", {"mode": "streaming"}, old=(), violates=("mode is immutable",)),
    # -- TableService ---------------------------------------------------------------------------
    service("minimal"),
    service("by trigger", {"schedule": DELETE, "trigger": {"afterDeltaCommits": 3}}),
    service("cron in range", {"schedule": "*/15 0-23/2 1,15,L 1-12 mon-fri"}),
    service("cron by names", {"schedule": "0 3 * JAN-MAR SUN#2"}),
    service("minute 60", {"schedule": "60 * * * *"}, violates=("schedule has a field out of its range",)),
    service("hour 24", {"schedule": "0 24 * * *"}, violates=("schedule has a field out of its range",)),
    service("day of month 0", {"schedule": "0 0 0 * *"}, violates=("schedule has a field out of its range",)),
    service("month 13", {"schedule": "0 0 1 13 *"}, violates=("schedule has a field out of its range",)),
    service("day of week 8", {"schedule": "0 0 * * 8"}, violates=("schedule has a field out of its range",)),
    service("schedule and trigger", {"trigger": {"afterDeltaCommits": 3}},
            violates=("a TableService runs on a schedule",)),
    service("neither schedule nor trigger", {"schedule": DELETE},
            violates=("a TableService runs on a schedule",)),
    service("sorted clustering", {"type": "clustering", "policy": {"sortColumns": ["v"]}}),
    service("sort columns on a compaction", {"policy": {"sortColumns": ["v"]}},
            violates=("policy.sortColumns is for",)),
    service("clean with retained", {"type": "clean", "policy": {"cleanRetained": 5}}),
    service("retained on a compaction", {"policy": {"cleanRetained": 5}},
            violates=("policy.cleanRetained is for",)),
    service("archival bounds",
            {"type": "archival", "policy": {"archiveMinInstants": 5, "archiveMaxInstants": 6}}),
    service("archival bounds crossed", {"type": "archival", "policy": {"archiveMinInstants": 30}},
            violates=("policy.archiveMinInstants must be",)),
    service("spark conf", {"spark": {"conf": {"spark.executor.memoryOverhead": "1g"}}}),
    service("not a spark property", {"spark": {"conf": {"executor.memory": "1g"}}},
            violates=("spark.conf takes Spark properties",)),
    service("unchanged", {"suspend": True}, old=()),
    service("table changed", {"tableRef": {"name": "u"}}, old=(), violates=("tableRef is immutable",)),
    service("type changed", {"type": "clean"}, old=(), violates=("type is immutable",)),
]


def _run(case: Case) -> list[Outcome]:
    return evaluate(case.kind, schema(case.kind), case.new, case.old)


def _rule_named(kind: str, part: str) -> Rule:
    matches = [r for r in rules_of(kind, schema(kind)) if r.message.startswith(part)]
    assert len(matches) == 1, f"{part!r} names {len(matches)} rules of {kind}, not one"
    return matches[0]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule_verdicts(case: Case) -> None:
    s = schema(case.kind)
    assert validation_errors(s, case.new) == [], "the case must be schema-valid: only CEL may reject it"
    outcomes = _run(case)
    assert [o for o in outcomes if o.error] == []
    rejected = sorted({o.rule.message for o in outcomes if not o.passed})
    assert rejected == sorted({_rule_named(case.kind, part).message for part in case.violates})


def test_a_column_listed_twice_in_one_group_is_refused_by_the_schema() -> None:
    twice = body("LakeTable", groups(["a", "a"], ["b"]))
    assert any("duplicate" in e.lower() for e in validation_errors(schema("LakeTable"), twice))


def test_transition_rules_do_not_run_on_create() -> None:
    new = body("LakeTable", {"orderingField": "ts"})
    transition = [o for o in evaluate("LakeTable", schema("LakeTable"), new) if o.rule.is_transition]
    assert transition == []


def test_every_rule_has_an_accepting_and_a_rejecting_case() -> None:
    accepted: set[Rule] = set()
    rejected: set[Rule] = set()
    for case in CASES:
        for o in _run(case):
            (accepted if o.passed else rejected).add(o.rule)
    every = {r for kind in CRD_FILES for r in rules_of(kind, schema(kind))}
    assert sorted(f"{r.kind} {r.path}: {r.rule}" for r in every - accepted) == [], "rules no case accepts"
    assert sorted(f"{r.kind} {r.path}: {r.rule}" for r in every - rejected) == [], "rules no case rejects"


CREATED = [c for c in CASES if c.old is None]


@pytest.mark.parametrize("case", CREATED, ids=[c.id for c in CREATED])
def test_the_spec_parsers_refuse_what_the_rules_reject(case: Case) -> None:
    """`weir run` has no API server to run these rules: the operator's spec parsers (which the reconcile
    core runs on every resource, on a cluster too) must refuse the same bodies, with the defaults applied
    as the API server would, naming the field."""
    from lakeoperator.specs import SpecError
    from lakeoperator.specs.service import parse_table_service
    from lakeoperator.specs.table import parse_lake_table
    from lakeoperator.specs.writer import parse_lake_writer

    parse = {"LakeTable": parse_lake_table, "LakeWriter": parse_lake_writer,
             "TableService": parse_table_service}[case.kind]
    defaulted = apply_defaults(schema(case.kind), case.new)
    if not case.violates:
        parse(defaulted)
        return
    with pytest.raises(SpecError, match=r"^spec\."):
        parse(defaulted)
