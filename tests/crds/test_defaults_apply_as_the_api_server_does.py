"""`apply_defaults` gives a minimal body the defaults of the API contract, as the API server would."""

from __future__ import annotations

import copy

from croniter import croniter

from lakeoperator.dev.crd_schema import apply_defaults, to_json_schema, validation_errors
from tests.crds.manifests import CRD_DIR, EXAMPLE_FILES, example, schema

MINIMAL_TABLE = example(CRD_DIR / "examples" / "laketable-minimal.yaml")
MINIMAL_WRITER = example(CRD_DIR / "examples" / "lakewriter-minimal.yaml")
MINIMAL_SERVICE = example(CRD_DIR / "examples" / "tableservice-minimal.yaml")

SPARK = {"mode": "kubernetes", "driver": {"cores": 1, "memory": "1g"},
         "executor": {"instances": 2, "cores": 1, "memory": "2g"}, "localCores": 2}


def test_a_minimal_table_gets_the_contract_defaults() -> None:
    spec = apply_defaults(schema("LakeTable"), MINIMAL_TABLE)["spec"]
    assert spec["partitionFields"] == []
    assert spec["tableType"] == "merge_on_read"
    assert spec["buckets"] == 4
    assert spec["concurrency"] == {"mode": "optimistic", "earlyDetection": {
        "strategy": "none", "checkCommits": True, "periodSeconds": 0.2}}
    assert spec["lock"] == {"provider": "storage"}
    assert spec["heartbeat"] == {"intervalSeconds": 10, "tolerableMisses": 3}
    assert spec["deletionPolicy"] == "Retain"
    assert [c["nullable"] for c in spec["schema"]] == [False, True]
    assert "orderingField" not in spec and "columnGroups" not in spec and "storage" not in spec


def test_a_minimal_writer_gets_the_contract_defaults() -> None:
    spec = apply_defaults(schema("LakeWriter"), MINIMAL_WRITER)["spec"]
    assert spec["source"]["format"] == "parquet"
    assert spec["operation"] == "upsert"
    assert spec["spark"] == SPARK
    assert spec["restartPolicy"] == {
        "type": "OnFailure", "onConflict": "Restart", "maxRestarts": 5, "maxInfraRestarts": 10,
        "backoff": {"initialSeconds": 10, "maxSeconds": 300, "factor": 2}, "resetAfterSeconds": 600}
    assert (spec["startTimeoutSeconds"], spec["readyTimeoutSeconds"]) == (300, 600)
    assert spec["state"] == "Running"
    assert "trigger" not in spec  # a streaming writer without one runs every 60 s (the operator's default)


def test_a_minimal_service_gets_the_contract_defaults() -> None:
    spec = apply_defaults(schema("TableService"), MINIMAL_SERVICE)["spec"]
    assert spec["policy"] == {"compactionStrategy": "all", "clusteringStrategy": "small_files",
                              "cleanPolicy": "keep_latest_commits", "archiveMinInstants": 20,
                              "archiveMaxInstants": 30}
    assert spec["spark"] == SPARK
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["suspend"] is False
    assert (spec["successfulRunsHistoryLimit"], spec["failedRunsHistoryLimit"]) == (3, 3)


def test_nested_defaults_fill_an_object_the_user_gave_partly() -> None:
    body = copy.deepcopy(MINIMAL_TABLE)
    body["spec"]["concurrency"] = {"mode": "non_blocking"}
    spec = apply_defaults(schema("LakeTable"), body)["spec"]
    assert spec["concurrency"]["earlyDetection"]["strategy"] == "none"
    assert body["spec"]["concurrency"] == {"mode": "non_blocking"}, "the input is not changed"


def test_a_null_field_is_dropped_then_defaulted_and_unknown_fields_are_kept() -> None:
    body = copy.deepcopy(MINIMAL_TABLE)
    body["spec"]["buckets"] = None
    body["spec"]["tombstoneRetentionHours"] = None
    body["spec"]["notAField"] = 1
    spec = apply_defaults(schema("LakeTable"), body)["spec"]
    assert spec["buckets"] == 4
    assert "tombstoneRetentionHours" not in spec
    assert spec["notAField"] == 1


def test_validation_refuses_unknown_fields_wrong_types_and_duplicate_keys() -> None:
    s = schema("LakeTable")
    body = copy.deepcopy(MINIMAL_TABLE)
    body["spec"]["bucket"] = 3
    body["spec"]["tableType"] = "merge-on-read"
    body["spec"]["schema"].append({"name": "id", "type": "int64"})
    body["spec"]["schema"].append({"name": "x", "type": "decimal128(40,2)"})
    errors = validation_errors(s, body)
    assert any("'bucket' was unexpected" in e for e in errors)
    assert any(e.startswith("spec.tableType:") for e in errors)
    assert any(e.startswith("spec.schema[2]: duplicate entry") for e in errors)
    assert any(e.startswith("spec.schema[3].type:") for e in errors)
    assert validation_errors(s, body, strict=False) != []
    assert not any("'bucket'" in e for e in validation_errors(s, body, strict=False))


def test_openapi_nullable_and_exclusive_bounds_become_json_schema() -> None:
    converted = to_json_schema({"type": "object", "description": "d", "properties": {
        "a": {"type": "string", "nullable": True, "enum": ["x"], "description": "d"},
        "b": {"type": "number", "minimum": 0, "exclusiveMinimum": True, "description": "d"}}})
    assert converted["properties"]["a"]["type"] == ["string", "null"]
    assert converted["properties"]["a"]["enum"] == ["x", None]
    assert converted["properties"]["b"] == {"type": "number", "exclusiveMinimum": 0}
    assert converted["additionalProperties"] is False
    free = to_json_schema({"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                           "properties": {"a": {"x-kubernetes-int-or-string": True}}})
    assert "additionalProperties" not in free
    assert free["properties"]["a"] == {"type": ["integer", "string"]}
    lenient = to_json_schema({"type": "object", "properties": {}}, strict=False)
    assert "additionalProperties" not in lenient


def test_example_schedules_are_cron_expressions_croniter_reads() -> None:
    for path in EXAMPLE_FILES:
        body = example(path)
        if body["kind"] == "TableService" and "schedule" in body["spec"]:
            assert croniter.is_valid(body["spec"]["schedule"]), path
