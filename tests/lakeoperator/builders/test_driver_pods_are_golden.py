"""The driver pods the operator creates, pinned as golden files: the command is the job contract's
argv under spark-submit, the pod is owned by its resource and named after the submission, executors
get the table's labels, an owner reference to the driver and the Secret by reference only.

Regenerate after an intended change: WEIR_UPDATE_GOLDEN=1 pytest tests/lakeoperator/builders"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lakeoperator.builders.driver_pod import (
    PodSettings,
    build_service_pod,
    build_writer_pod,
    child_name,
)
from lakeoperator.builders.job_args import ZOOKEEPER_PASSWORD_ENV, ZOOKEEPER_USERNAME_ENV
from lakeoperator.plan.service import run_id
from lakeoperator.plan.writer import SUBMISSION_LABEL, submission_id
from lakeoperator.specs import ObjectRef, parse_lake_table, parse_lake_writer, parse_table_service
from sparkjobs.contract import BatchWriteArgs, StreamWriteArgs, TableServiceArgs

GOLDEN = Path(__file__).parent / "golden"
SETTINGS = PodSettings(default_image="weir-spark:test", jobs_dir="/opt/weir/sparkjobs")


def body(kind: str, name: str, spec: dict) -> dict:
    return {"apiVersion": "weir.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": "data", "uid": f"uid-{name}", "generation": 3},
            "spec": spec}


TABLE = body("LakeTable", "events", {
    "location": "s3://lake/events", "recordKey": ["id"], "partitionFields": ["dt"],
    "schema": [{"name": "id", "type": "int64", "nullable": False}, {"name": "dt", "type": "string"},
               {"name": "ts", "type": "int64"}, {"name": "v", "type": "string"}],
    "orderingField": "ts",
    "storage": {"secretRef": {"name": "lake-creds", "key": "options.json"},
                "options": {"endpoint_url": "http://minio:9000"}},
    "concurrency": {"mode": "optimistic", "earlyDetection": {"strategy": "direct_zk"}},
    "lock": {"provider": "zookeeper", "zookeeper": {"connect": "zk-0.zk:2181,zk-1.zk:2181", "path": "/weir"}},
})
LOCAL_TABLE = body("LakeTable", "people", {
    "location": "/data/people", "recordKey": ["id"],
    "schema": [{"name": "id", "type": "int64"}, {"name": "name", "type": "string"}]})

CASES = {
    "writer-batch-kubernetes": (TABLE, body("LakeWriter", "backfill", {
        "tableRef": {"name": "events"}, "mode": "batch", "operation": "insert",
        "source": {"format": "json", "path": "s3://landing/events/2026-11-23",
                   "options": {"multiLine": "true"}},
        "spark": {"mode": "kubernetes", "image": "registry/weir-spark:1.2",
                  "serviceAccountName": "weir-spark",
                  "driver": {"cores": 2, "memory": "4g"},
                  "executor": {"instances": 4, "cores": 2, "memory": "8g"},
                  "conf": {"spark.sql.shuffle.partitions": "64"}}})),
    "writer-stream-local": (LOCAL_TABLE, body("LakeWriter", "people-stream", {
        "tableRef": {"name": "people"}, "mode": "streaming", "source": {"path": "/landing/people"},
        "trigger": {"intervalSeconds": 30}, "spark": {"mode": "local", "localCores": 3}})),
    "writer-stream-kafka": (TABLE, body("LakeWriter", "events-kafka", {
        "tableRef": {"name": "events"}, "mode": "streaming",
        "source": {"kafka": {
            "bootstrapServers": "kafka-0.kafka:9092,kafka-1.kafka:9092", "topics": ["events", "events-eu"],
            "startingOffsets": "latest", "maxOffsetsPerTrigger": 100000,
            "options": {"security.protocol": "SASL_SSL", "fetch.max.bytes": "52428800"},
            "credentialsSecretRef": {"name": "kafka-creds", "key": "consumer.json"},
            "value": {"format": "debezium"},
            "badRecords": {"policy": "deadLetter", "deadLetterTopic": "events-dead"}}},
        "trigger": {"intervalSeconds": 10}})),
    "service-compaction": (TABLE, body("TableService", "events-compaction", {
        "tableRef": {"name": "events"}, "type": "compaction", "schedule": "*/15 * * * *",
        "policy": {"compactionStrategy": "log_count"}})),
}


def build(case: str) -> dict:
    table_body, owner_body = CASES[case]
    table = parse_lake_table(table_body)
    owner = ObjectRef.from_body(owner_body)
    if owner_body["kind"] == "LakeWriter":
        writer = parse_lake_writer(owner_body)
        return build_writer_pod(owner, writer, table, submission_id(owner, 1), SETTINGS)
    return build_service_pod(owner, parse_table_service(owner_body), table,
                             run_id(owner, datetime(2026, 11, 23, 12, 15, tzinfo=UTC)), SETTINGS)


@pytest.mark.parametrize("case", sorted(CASES))
def test_driver_pod_matches_its_golden_file(case):
    pod = build(case)
    path = GOLDEN / f"{case}.json"
    if os.environ.get("WEIR_UPDATE_GOLDEN"):
        path.write_text(json.dumps(pod, indent=2, sort_keys=True) + "\n")
    assert pod == json.loads(path.read_text()), f"rerun with WEIR_UPDATE_GOLDEN=1 if intended ({path})"


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_job_arguments_round_trip_through_the_contract(case):
    args = build(case)["spec"]["containers"][0]["args"]
    entry = next(i for i, a in enumerate(args) if a.endswith(".py"))
    contract = {"batch_write.py": BatchWriteArgs, "stream_write.py": StreamWriteArgs,
                "table_service.py": TableServiceArgs}[args[entry].rsplit("/", 1)[1]]
    parsed = contract.from_argv(args[entry + 1:])
    assert parsed.table in ("s3://lake/events", "/data/people")
    assert "lake-creds" not in " ".join(args[entry:])  # the Secret reaches the job by a variable name only
    assert "kafka-creds" not in " ".join(args[entry:])


def test_a_rerun_builds_the_same_pod_and_another_submission_another_name():
    assert build("writer-batch-kubernetes") == build("writer-batch-kubernetes")
    table = parse_lake_table(TABLE)
    writer_body = CASES["writer-batch-kubernetes"][1]
    owner, writer = ObjectRef.from_body(writer_body), parse_lake_writer(writer_body)
    first = build_writer_pod(owner, writer, table, submission_id(owner, 1), SETTINGS)["metadata"]
    second = build_writer_pod(owner, writer, table, submission_id(owner, 2), SETTINGS)["metadata"]
    assert first["name"] != second["name"]
    assert first["labels"][SUBMISSION_LABEL] == first["name"] == submission_id(owner, 1)


def test_drivers_run_as_the_operators_spark_account_unless_the_spec_names_one():
    """The chart gives drivers a service account allowed to create executors; a spec's own wins."""
    table = parse_lake_table(TABLE)
    settings = PodSettings(default_image="weir-spark:test", service_account="weir-spark-drivers")
    conf_key = "spark.kubernetes.authenticate.executor.serviceAccountName="

    def account(writer_body: dict) -> tuple[str | None, list[str]]:
        pod = build_writer_pod(ObjectRef.from_body(writer_body), parse_lake_writer(writer_body), table,
                               "x-1-00000000", settings)
        args = pod["spec"]["containers"][0]["args"]
        return pod["spec"].get("serviceAccountName"), [a for a in args if a.startswith(conf_key)]

    named = CASES["writer-batch-kubernetes"][1]
    unnamed = json.loads(json.dumps(named))
    del unnamed["spec"]["spark"]["serviceAccountName"]
    assert account(named) == ("weir-spark", [f"{conf_key}weir-spark"])
    assert account(unnamed) == ("weir-spark-drivers", [f"{conf_key}weir-spark-drivers"])
    pod = build_writer_pod(ObjectRef.from_body(unnamed), parse_lake_writer(unnamed), table, "x-1-00000000",
                           SETTINGS)
    assert "serviceAccountName" not in pod["spec"]   # no setting: the namespace's default account


def test_names_stay_dns_labels_and_unique_when_cut():
    long = "w" * 70
    a, b = child_name(f"{long}-1"), child_name(f"{long}-2")
    assert len(a) <= 63 and len(b) <= 63 and a != b and a == child_name(f"{long}-1")


def test_zookeeper_credentials_reach_driver_and_executors_from_their_secret_only() -> None:
    table_body = json.loads(json.dumps(TABLE))
    table_body["spec"]["lock"]["zookeeper"]["credentialsSecret"] = {"name": "tenant-zk", "passwordKey": "pw"}
    writer_body = CASES["writer-batch-kubernetes"][1]
    owner = ObjectRef.from_body(writer_body)
    pod = build_writer_pod(owner, parse_lake_writer(writer_body), parse_lake_table(table_body),
                           submission_id(owner, 1), SETTINGS)
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e.get("valueFrom") for e in container["env"]}
    assert env[ZOOKEEPER_USERNAME_ENV] == {"secretKeyRef": {"name": "tenant-zk", "key": "username"}}
    assert env[ZOOKEEPER_PASSWORD_ENV] == {"secretKeyRef": {"name": "tenant-zk", "key": "pw"}}
    secret_vars = (ZOOKEEPER_USERNAME_ENV, ZOOKEEPER_PASSWORD_ENV)
    assert all("value" not in e for e in container["env"] if e["name"] in secret_vars)  # by reference only
    args = container["args"]
    assert f"spark.kubernetes.executor.secretKeyRef.{ZOOKEEPER_USERNAME_ENV}=tenant-zk:username" in args
    assert f"spark.kubernetes.executor.secretKeyRef.{ZOOKEEPER_PASSWORD_ENV}=tenant-zk:pw" in args
    entry = next(i for i, a in enumerate(args) if a.endswith(".py"))
    assert "tenant-zk" not in " ".join(args[entry:])  # never in the job's arguments
    # the storage Secret is still there, and a table without credentials gets no such variables
    assert env["WEIR_STORAGE_OPTIONS"] == {"secretKeyRef": {"name": "lake-creds", "key": "options.json"}}
    plain = json.dumps(build("writer-batch-kubernetes"))
    assert ZOOKEEPER_USERNAME_ENV not in plain and ZOOKEEPER_PASSWORD_ENV not in plain


def test_the_operator_and_lakecore_agree_on_the_credentials_variables() -> None:
    from lakecore.concurrency import zookeeper

    ours = (ZOOKEEPER_USERNAME_ENV, ZOOKEEPER_PASSWORD_ENV)
    assert ours == (zookeeper.USERNAME_ENV, zookeeper.PASSWORD_ENV)


def test_a_kafka_writer_reads_its_credentials_secret_as_one_variable():
    pod = build("writer-stream-kafka")
    env = {e["name"]: e.get("valueFrom") for e in pod["spec"]["containers"][0]["env"]}
    assert env["WEIR_KAFKA_OPTIONS"] == {"secretKeyRef": {"name": "kafka-creds", "key": "consumer.json"}}
    args = pod["spec"]["containers"][0]["args"]
    parsed = StreamWriteArgs.from_argv(args[next(i for i, a in enumerate(args) if a.endswith(".py")) + 1:])
    assert parsed.kafka_options_env == "WEIR_KAFKA_OPTIONS" and parsed.kafka_topics == ("events", "events-eu")
    assert parsed.value_format == "debezium" and parsed.dead_letter_topic == "events-dead"


def test_a_kafka_writers_schema_registry_reaches_the_job_with_its_credentials_by_reference():
    table_body, writer_body = CASES["writer-stream-kafka"]
    writer_body = json.loads(json.dumps(writer_body))
    writer_body["spec"]["source"]["kafka"]["value"] = {"format": "avro", "schemaRegistry": {
        "url": "https://registry.kafka:8081", "credentialsSecretRef": {"name": "registry", "key": "auth"}}}
    owner = ObjectRef.from_body(writer_body)
    pod = build_writer_pod(owner, parse_lake_writer(writer_body), parse_lake_table(table_body),
                           submission_id(owner, 1), SETTINGS)
    env = {e["name"]: e.get("valueFrom") for e in pod["spec"]["containers"][0]["env"]}
    assert env["WEIR_SCHEMA_REGISTRY_AUTH"] == {"secretKeyRef": {"name": "registry", "key": "auth"}}
    assert env["WEIR_KAFKA_OPTIONS"] == {"secretKeyRef": {"name": "kafka-creds", "key": "consumer.json"}}
    args = pod["spec"]["containers"][0]["args"]
    parsed = StreamWriteArgs.from_argv(args[next(i for i, a in enumerate(args) if a.endswith(".py")) + 1:])
    assert (parsed.value_format, parsed.schema_registry_url, parsed.schema_registry_auth_env,
            parsed.avro_schema) == ("avro", "https://registry.kafka:8081", "WEIR_SCHEMA_REGISTRY_AUTH", None)
