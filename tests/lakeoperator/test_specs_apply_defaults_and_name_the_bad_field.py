"""Bodies parse into typed specs with the API sketch's defaults; an invalid field is a SpecError naming it."""

from __future__ import annotations

from typing import Any

import pytest

from lakecore.config import LockSpec
from lakeoperator.specs import (
    BackoffSpec,
    ColumnSpec,
    ConcurrencySpec,
    DriverResources,
    ExecutorResources,
    HeartbeatSpec,
    ObjectRef,
    RestartPolicySpec,
    SparkSpec,
    SpecError,
    StorageSpec,
    TriggerSpec,
    ZookeeperCredentialsRef,
    parse_lake_table,
    parse_lake_writer,
    parse_table_service,
    spark_memory_mib,
)
from sparkjobs.contract import TableServiceArgs
from tests.lakeoperator.bodies import lake_table, lake_writer, meta, table_service


def test_lake_table_defaults() -> None:
    spec = parse_lake_table(lake_table())
    assert spec.schema[1] == ColumnSpec("ts", "timestamp_us", True)
    assert spec.record_key == ("id",) and spec.partition_fields == ("day",)
    assert (spec.table_type, spec.buckets, spec.deletion_policy) == ("merge_on_read", 4, "Retain")
    assert spec.storage == StorageSpec()
    assert spec.concurrency == ConcurrencySpec()
    assert spec.concurrency.early_detection.strategy == "none"
    assert spec.concurrency.early_detection.check_commits is True
    assert spec.concurrency.early_detection.period_seconds == 0.2
    assert spec.lock == LockSpec() and spec.heartbeat == HeartbeatSpec(10, 3)
    assert spec.ordering_field is None and spec.column_groups == ()
    assert spec.tombstone_retention_hours is None


def test_zookeeper_credentials_are_a_secret_reference_with_default_keys() -> None:
    def zookeeper(**credentials: Any) -> Any:
        body = lake_table(lock={"provider": "zookeeper",
                                "zookeeper": {"connect": "zk:2181", "credentialsSecret": credentials}})
        spec = parse_lake_table(body)
        assert spec.lock == LockSpec("zookeeper", connect="zk:2181")
        return spec.lock_credentials

    assert zookeeper(name="tenant-a-zk") == ZookeeperCredentialsRef("tenant-a-zk", "username", "password")
    assert zookeeper(name="zk", usernameKey="user", passwordKey="pass") == ZookeeperCredentialsRef(
        "zk", "user", "pass")
    plain = parse_lake_table(lake_table(lock={"provider": "zookeeper", "zookeeper": {"connect": "zk:2181"}}))
    assert plain.lock.provider == "zookeeper" and plain.lock_credentials is None


def test_lake_writer_defaults() -> None:
    spec = parse_lake_writer(lake_writer())
    assert spec.source.format == "parquet" and spec.source.path == "s3://in/orders/"
    assert spec.operation == "upsert" and spec.trigger == TriggerSpec(60, False)
    assert spec.spark == SparkSpec(mode="kubernetes", driver=DriverResources(1, "1g"),
                                   executor=ExecutorResources(2, 1, "2g"), local_cores=2)
    assert spec.restart_policy == RestartPolicySpec(
        type="OnFailure", on_conflict="Restart", max_restarts=5, max_infra_restarts=10,
        backoff=BackoffSpec(10, 300, 2), reset_after_seconds=600)
    assert (spec.start_timeout_seconds, spec.ready_timeout_seconds) == (300, 600)
    assert spec.state == "Running" and spec.restart_nonce is None


def test_a_kafka_source_defaults_to_json_from_the_earliest_offsets_failing_on_bad_messages() -> None:
    spec = parse_lake_writer(lake_writer(source={"kafka": {"bootstrapServers": "k:9092", "topics": ["t"]}}))
    kafka = spec.source.kafka
    assert kafka is not None and (kafka.value_format, kafka.starting_offsets, kafka.bad_records,
                                  kafka.on_data_loss) == ("json", "earliest", "fail", "fail")
    assert kafka.credentials is None and spec.source.path is None
    assert "--kafka-on-data-loss" not in kafka.args(None).to_argv()
    told = parse_lake_writer(lake_writer(source={"kafka": {"bootstrapServers": "k:9092", "topics": ["t"],
                                                           "onDataLoss": "skip"}})).source.kafka
    assert told is not None and told.args(None).kafka_on_data_loss == "skip"


def test_table_service_defaults_match_the_jobs_arguments() -> None:
    spec = parse_table_service(table_service())
    assert spec.concurrency_policy == "Forbid" and spec.suspend is False
    assert (spec.successful_runs_history_limit, spec.failed_runs_history_limit) == (3, 3)
    args = TableServiceArgs(table="t", service="compaction")
    p = spec.policy
    assert (p.compaction_strategy, p.clustering_strategy, p.sort_columns, p.clean_policy, p.clean_retained,
            p.archive_min_instants, p.archive_max_instants) == (
        args.compaction_strategy, args.clustering_strategy, args.sort_columns, args.clean_policy,
        args.clean_retained, args.archive_min_instants, args.archive_max_instants)


def test_camel_case_fields_reach_the_spec() -> None:
    spec = parse_lake_writer(lake_writer(
        restartPolicy={"type": "Always", "onConflict": "Abort", "maxRestarts": 1, "maxInfraRestarts": 2,
                       "backoff": {"initialSeconds": 1, "maxSeconds": 8, "factor": 3},
                       "resetAfterSeconds": 30},
        spark={"mode": "local", "localCores": 4, "conf": {"spark.sql.shuffle.partitions": "8"},
               "executor": {"instances": 0}},
        trigger={"availableNow": True}, state="Suspended", restartNonce="n1", columnGroup="prices"))
    assert spec.restart_policy == RestartPolicySpec("Always", "Abort", 1, 2, BackoffSpec(1, 8, 3), 30)
    assert spec.spark.local_cores == 4 and spec.spark.executor.instances == 0
    assert spec.trigger.available_now and spec.state == "Suspended" and spec.restart_nonce == "n1"


def test_object_ref_reads_the_annotations() -> None:
    body = lake_writer()
    assert ObjectRef.from_body(body) == ObjectRef("lake", "orders-ingest", "uid-orders-ingest", 1)
    body["metadata"] = meta("w", 7, **{"weir.dev/paused": "true", "weir.dev/managed": "false"})
    ref = ObjectRef.from_body(body)
    assert (ref.generation, ref.paused, ref.managed) == (7, True, False)


INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("table", lake_table(schema=[{"name": "id", "type": "int65"}], recordKey=["id"], partitionFields=[]),
     "spec.schema[0].type"),
    ("table", lake_table(schema=[{"name": "id", "type": "decimal128(39,2)"}], recordKey=["id"],
                         partitionFields=[]), "spec.schema[0].type"),
    ("table", lake_table(schema=[{"name": "_weir_x", "type": "int64"}], recordKey=["_weir_x"],
                         partitionFields=[]), "spec.schema[0].name"),
    ("table", lake_table(columnGroups=[{"name": "a__b", "orderingField": "ts", "columns": ["amount"]}]),
     "spec.columnGroups[0].name"),
    ("table", lake_table(recordKey=["nope"]), "spec.recordKey"),
    ("table", lake_table(recordKey=[]), "spec.recordKey"),
    ("table", lake_table(buckets=0), "spec.buckets"),
    ("table", lake_table(orderingField="ts", columnGroups=[{"name": "g", "orderingField": "ts",
                                                            "columns": ["amount"]}]), "spec.columnGroups"),
    ("table", lake_table(tableType="copy_on_write", concurrency={"mode": "non_blocking"}),
     "spec.concurrency.mode"),
    ("table", lake_table(concurrency={"earlyDetection": {"strategy": "direct_zk"}}),
     "spec.concurrency.earlyDetection.strategy"),
    ("table", lake_table(concurrency={"mode": "non_blocking", "earlyDetection": {"strategy": "direct"}}),
     "spec.concurrency.earlyDetection.strategy"),
    ("table", lake_table(lock={"provider": "zookeeper"}), "spec.lock.zookeeper.connect"),
    ("table", lake_table(lock={"provider": "zookeeper", "zookeeper": {"connect": "u:p@zk:2181"}}),
     "spec.lock.zookeeper.connect"),
    ("table", lake_table(lock={"provider": "zookeeper", "zookeeper": {"connect": "zk:2181",
                                                                     "credentialsSecret": {}}}),
     "spec.lock.zookeeper.credentialsSecret.name"),
    ("table", lake_table(lock={"provider": "zookeeper", "zookeeper": {
        "connect": "zk:2181", "credentialsSecret": {"name": "zk", "password": "hunter2"}}}),
     "spec.lock.zookeeper.credentialsSecret.password"),
    ("table", lake_table(lock={"provider": "zookeeper", "zookeeper": {
        "connect": "zk:2181", "credentialsSecret": {"name": "zk", "usernameKey": "", "passwordKey": "p"}}}),
     "spec.lock.zookeeper.credentialsSecret.usernameKey"),
    ("table", lake_table(lock={"provider": "zookeeper", "zookeeper": {
        "connect": "zk:2181", "credentialsSecret": {"name": "zk", "passwordKey": "username"}}}),
     "spec.lock.zookeeper.credentialsSecret.passwordKey"),
    ("table", lake_table(lock={"provider": "zookeeper",
                               "zookeeper": {"connect": "zk:2181", "path": "weir/o"}}),
     "spec.lock.zookeeper.path"),
    ("table", lake_table(storage={"options": {"key": "AKIA..."}}), "spec.storage.options.key"),
    ("table", lake_table(deletionPolicy="Purge"), "spec.deletionPolicy"),
    ("table", lake_table(bukets=3), "spec.bukets"),
    ("table", lake_table(location="gs://bucket/orders"), "spec.location"),   # retried forever, as an outage
    ("table", lake_table(location="s3:/bucket/orders"), "spec.location"),
    ("writer", lake_writer(source={"path": "a", "table": {"name": "b"}}), "spec.source"),
    ("writer", lake_writer(source={"format": "json"}), "spec.source"),
    ("writer", lake_writer(source={"path": "a", "kafka": {"bootstrapServers": "k:9092", "topics": ["t"]}}),
     "spec.source"),
    ("writer", lake_writer(source={"kafka": {"bootstrapServers": "k:9092"}}), "spec.source.kafka"),
    ("writer", lake_writer(source={"kafka": {"bootstrapServers": "k:9092", "topics": ["t"],
                                             "options": {"ssl.key.password": "x"}}}), "spec.source.kafka"),
    ("writer", lake_writer(source={"kafka": {"bootstrapServers": "k:9092", "topics": ["t"],
                                             "value": {"format": "protobuf"}}}),
     "spec.source.kafka.value.format"),
    ("writer", lake_writer(source={"kafka": {"bootstrapServers": "k:9092", "topics": ["t"],
                                             "badRecords": {"policy": "deadLetter"}}}), "spec.source.kafka"),
    ("writer", lake_writer(mode="micro"), "spec.mode"),
    ("writer", lake_writer(source={"format": "cvs", "path": "in"}), "spec.source.format"),  # (in the driver)
    ("writer", lake_writer(operation="merge"), "spec.operation"),
    ("writer", lake_writer(trigger={"intervalSeconds": 5, "availableNow": True}), "spec.trigger"),
    ("writer", lake_writer(restartPolicy={"maxRestarts": -1}), "spec.restartPolicy.maxRestarts"),
    ("writer", lake_writer(restartPolicy={"backoff": {"initialSeconds": 20, "maxSeconds": 10}}),
     "spec.restartPolicy.backoff.maxSeconds"),
    ("writer", lake_writer(restartPolicy={"backoff": {"factor": 0.5}}), "spec.restartPolicy.backoff.factor"),
    ("writer", lake_writer(state="Paused"), "spec.state"),
    ("writer", lake_writer(spark={"conf": {"spark.x": 1}}), "spec.spark.conf"),
    ("writer", lake_writer(spark={"conf": {"spark.master": "local[*]"}}), "spec.spark.conf"),
    ("writer", lake_writer(spark={"conf": {"spark.kubernetes.executor.label.team": "a"}}), "spec.spark.conf"),
    ("writer", lake_writer(spark={"driver": {"memory": "lots"}}), "spec.spark.driver.memory"),
    ("service", table_service(spark={"conf": {"spark.app.name": "mine"}}), "spec.spark.conf"),
    ("service", table_service(spark={"driver": {"memory": "2 GB"}}), "spec.spark.driver.memory"),
    ("service", table_service(trigger={"afterDeltaCommits": 5}), "spec.schedule"),
    ("service", table_service(schedule=None), "spec.schedule"),
    ("service", table_service(schedule="every hour"), "spec.schedule"),
    ("service", table_service(schedule="0 0 */6 * * *"), "spec.schedule"),
    ("service", table_service(schedule="@reboot"), "spec.schedule"),
    ("service", table_service(schedule=None, trigger={"afterDeltaCommits": 0}),
     "spec.trigger.afterDeltaCommits"),
    ("service", table_service(type="vacuum"), "spec.type"),
    ("service", table_service(policy={"archiveMinInstants": 30, "archiveMaxInstants": 30}),
     "spec.policy.archiveMaxInstants"),
]
PARSERS = {"table": parse_lake_table, "writer": parse_lake_writer, "service": parse_table_service}


@pytest.mark.parametrize(("kind", "body", "field_path"), INVALID,
                         ids=[c[2] + f"-{i}" for i, c in enumerate(INVALID)])
def test_invalid_field_is_named_and_the_message_says_what_to_do(kind: str, body: dict[str, Any],
                                                                field_path: str) -> None:
    if body["spec"].get("schedule", "") is None:
        del body["spec"]["schedule"]
    with pytest.raises(SpecError) as err:
        PARSERS[kind](body)
    assert err.value.field_path == field_path
    assert str(err.value).startswith(field_path + ": ")
    assert any(word in err.value.message for word in ("use", "set", "drop", "fix", "add", "raise", "put",
                                                      "revert", "must", "give", "list", "check", "quote",
                                                      "change", "choose", "rename"))


def test_a_missing_spec_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match=r"^spec: "):
        parse_lake_writer({"metadata": meta()})


def test_specs_are_frozen() -> None:
    spec = parse_lake_writer(lake_writer())
    with pytest.raises(AttributeError):
        spec.mode = "batch"  # type: ignore[misc]


@pytest.mark.parametrize("schedule", ["@hourly", "@daily", "@weekly", "@monthly", "@yearly", "@annually",
                                      "@midnight", "*/5 * * * *"])
def test_the_named_schedules_the_crd_allows_are_accepted(schedule: str) -> None:
    assert parse_table_service(table_service(schedule=schedule)).schedule == schedule


def test_managed_spark_settings_are_refused_in_the_spec() -> None:
    """Refused by the parser, before any pod is built (the builder relies on it)."""
    conf = {"spark.master": "local[*]", "spark.sql.shuffle.partitions": "4"}
    writer_body = lake_writer(spark={"conf": conf})
    with pytest.raises(SpecError, match=r"spark\.master") as err:
        parse_lake_writer(writer_body)
    assert "spark.sql" not in str(err.value) and "remove it from spark.conf" in str(err.value)


@pytest.mark.parametrize(("text", "mib"), [("512m", 512), ("2g", 2048), ("1G", 1024), ("1048576k", 1024),
                                           ("1t", 1024 * 1024)])
def test_spark_memory_notation(text: str, mib: int) -> None:
    assert spark_memory_mib(text) == mib
    assert parse_lake_writer(lake_writer(spark={"driver": {"memory": text}})).spark.driver.memory == text


def test_a_misspelt_field_is_named_with_the_likely_one() -> None:
    body = lake_table()
    body["spec"]["recordkey"] = body["spec"].pop("recordKey")
    with pytest.raises(SpecError, match=r"^spec\.recordkey: unknown field \(did you mean recordKey\?\); the "
                                        r"fields here are location, "):
        parse_lake_table(body)
    body = lake_writer()
    body["spec"]["sourse"] = body["spec"].pop("source")
    with pytest.raises(SpecError, match=r"^spec\.sourse: unknown field \(did you mean source\?\)"):
        parse_lake_writer(body)


@pytest.mark.parametrize(("given", "meant"), [("long", "int64"), ("date", "date32"),
                                              ("timestamp", "timestamp_us"), ("strin", "string"),
                                              ("double", "float64")])
def test_a_column_type_by_another_name_is_told_the_laketables(given: str, meant: str) -> None:
    body = {"metadata": {"name": "t"}, "spec": {"location": "/l", "recordKey": ["id"],
                                                "schema": [{"name": "id", "type": given}]}}
    with pytest.raises(SpecError, match=rf"spec.schema\[0\].type: '{given}' is not a column type \(did you "
                                        rf"mean {meant}\?\)"):
        parse_lake_table(body)


def test_a_cron_schedule_with_five_fields_out_of_range_is_told_so() -> None:
    from lakeoperator.specs import parse_table_service

    with pytest.raises(SpecError, match=r"'61 25 \* \* \*' is not a cron schedule: a field's value is out of "
                                        r"its range"):
        parse_table_service(table_service(schedule="61 25 * * *"))
    with pytest.raises(SpecError, match=r"'every hour' is not a cron schedule; use five fields"):
        parse_table_service(table_service(schedule="every hour"))


def test_a_tables_mistakes_are_told_at_once_not_one_per_run() -> None:
    """A misspelt field, two wrong column types and a record key given as a string took four runs to see,
    one mistake each; they are one message now, the first naming the field."""
    body = lake_table(orderingFeild="ts", recordKey="id", tabletype="copy_on_write",
                      schema=[{"name": "id", "type": "long"}, {"name": "ts", "type": "int64"},
                              {"name": "name", "type": "strin"}])
    with pytest.raises(SpecError) as told:
        parse_lake_table(body)
    said = str(told.value)
    assert told.value.field_path == "spec"
    assert said.startswith("spec: unknown fields orderingFeild (did you mean orderingField?), tabletype (did "
                           "you mean tableType?); the fields here are"), said
    for part in ("; also spec.schema[0].type: 'long' is not a column type (did you mean int64?)",
                 "; also spec.schema[2].type: 'strin' is not a column type (did you mean string?)",
                 "; also spec.recordKey: must be a list of"):
        assert part in said, said


def test_a_writers_mistakes_are_told_at_once_the_misspelt_fields_content_too() -> None:
    """`tabelRef`, `format: cvs` and `spark.mode: locl` took three rounds: the unknown field, then (once
    renamed) the Spark mode, and the format only inside the driver. A misspelt field is parsed under the
    name it likely meant (a mistake inside it is told too), and each other mistake after it."""
    body = lake_writer(source={"format": "cvs", "path": "in"}, spark={"mode": "locl"},
                       restartPolicy={"maxRestarts": -1})
    body["spec"]["tabelRef"] = {"name": "orders", "namespace": "x"}
    del body["spec"]["tableRef"]
    with pytest.raises(SpecError) as told:
        parse_lake_writer(body)
    said = str(told.value)
    assert told.value.field_path == "spec.tabelRef" and said.startswith("spec.tabelRef: unknown field (did "
                                                                        "you mean tableRef?)"), said
    for part in ("; also spec.tableRef.namespace: unknown field",
                 "; also spec.source.format: 'cvs' is not a file format Spark reads (did you mean 'csv'?)",
                 "; also spec.spark.mode: 'locl' is not one of", "; also spec.restartPolicy.maxRestarts"):
        assert part in said, said


@pytest.mark.parametrize(("missing", "first"), [
    ("tableRef", "spec.tableRef: is required; set it"),
    ("tableRef.name", "spec.tableRef.name: is required; set it"),
    ("mode", "spec.mode: is required; use one of streaming, batch"),
    ("source", "spec.source: needs exactly one of path"),
    ("source.path", "spec.source: needs exactly one of path"),
])
def test_a_missing_required_field_does_not_hide_the_mistakes_after_it(missing: str, first: str) -> None:
    """A writer without `tableRef` (or its name, its mode, a source's path) and with `spark.mode: locl`
    was told only of the missing field; the Spark mode took another round. The missing field gets a
    stand-in value while the rest is checked (of the kind it takes: a whole missing object is told
    once, not as the fields it lacks)."""
    body = lake_writer(source={"format": "csv", "path": "in"}, spark={"mode": "locl"},
                       restartPolicy={"maxRestarts": -1})
    node = body["spec"]
    *parents, last = missing.split(".")
    for key in parents:
        node = node[key]
    del node[last]
    with pytest.raises(SpecError) as told:
        parse_lake_writer(body)
    said = str(told.value)
    assert said.startswith(first), said
    for part in ("; also spec.spark.mode: 'locl' is not one of", "; also spec.restartPolicy.maxRestarts"):
        assert part in said, said
    assert said.count("; also") == 2, said


def test_a_table_services_missing_type_is_told_with_its_other_mistakes() -> None:
    """A service with a schedule that is no cron schedule, no type and a bad policy was told of the
    schedule alone: without it, "schedule or trigger is required" stopped the search. The dropped
    schedule gets a stand-in, so the type and the policy are told too."""
    body = table_service(schedule="every hour", policy={"archiveMinInstants": 0})
    del body["spec"]["type"]
    with pytest.raises(SpecError) as told:
        parse_table_service(body)
    said = str(told.value)
    assert said.startswith("spec.schedule: 'every hour' is not a cron schedule"), said
    for part in ("; also spec.policy.archiveMinInstants: must be an integer >= 1",
                 "; also spec.type: is required; use one of compaction"):
        assert part in said, said


def test_a_table_without_its_record_key_is_told_its_other_mistakes_too() -> None:
    """A missing recordKey stopped the search; a column of the schema (not a partition field) now stands
    in for it while the rest is checked."""
    body = lake_table(tableType="cow", buckets=-1)
    del body["spec"]["recordKey"]
    with pytest.raises(SpecError) as told:
        parse_lake_table(body)
    said = str(told.value)
    assert said.startswith("spec.recordKey: is required"), said
    for part in ("; also spec.tableType: 'cow' is not one of",
                 "; also spec.buckets: must be an integer >= 1"):
        assert part in said, said
    assert "partitionFields" not in said, said
