"""The CRDs' enums and defaults are what lakecore and the jobs' contract accept: they cannot drift apart."""

from __future__ import annotations

from typing import Any, get_args

from lakecore.config import CODECS, DEFAULT_CODEC, ConcurrencyMode, LockProvider, TableConfig, TableType
from lakecore.services.clean_plan import PolicyKind
from lakecore.services.clustering_plan import StrategyKind as ClusteringKind
from lakecore.services.compaction_plan import StrategyKind as CompactionKind
from lakecore.write import OPERATIONS as LAKECORE_OPERATIONS
from sparkjobs import contract
from tests.crds.manifests import schema


def _spec(kind: str, *path: str) -> dict[str, Any]:
    node = schema(kind)["properties"]["spec"]
    for p in path:
        node = node["items"] if p == "[]" else node["properties"][p]
    return dict(node)


def test_table_enums_are_lakecore_literals() -> None:
    assert _spec("LakeTable", "tableType")["enum"] == list(get_args(TableType))
    # single_writer and in_process serve one process; a table written by pods needs a shared protocol
    assert set(_spec("LakeTable", "concurrency", "mode")["enum"]) <= set(get_args(ConcurrencyMode))
    assert set(_spec("LakeTable", "lock", "provider")["enum"]) <= set(get_args(LockProvider))
    strategies = _spec("LakeTable", "concurrency", "earlyDetection", "strategy")["enum"]
    assert strategies == ["none", *contract.EARLY_DETECTION]
    assert tuple(_spec("LakeTable", "compression")["enum"]) == CODECS
    # no default: a spec without a codec leaves an adopted table's as it is (a new one: lakecore's)
    assert "default" not in _spec("LakeTable", "compression")
    assert TableConfig.__dataclass_fields__["compression"].default == DEFAULT_CODEC in CODECS


def test_public_storage_options_are_the_contracts() -> None:
    rule = _spec("LakeTable", "storage", "options")["x-kubernetes-validations"][0]["rule"]
    allowed = ", ".join(f"'{o}'" for o in contract.PUBLIC_STORAGE_OPTIONS)
    assert rule == f"self.all(k, k in [{allowed}])"


def test_writer_operations_are_the_contracts() -> None:
    fields = contract.WriterArgs.__dataclass_fields__
    assert tuple(_spec("LakeWriter", "operation")["enum"]) == contract.OPERATIONS
    assert tuple(LAKECORE_OPERATIONS) == contract.OPERATIONS
    assert _spec("LakeWriter", "operation")["default"] == fields["operation"].default
    assert _spec("LakeWriter", "source", "format")["default"] == fields["source_format"].default


def test_service_types_policies_and_defaults_are_the_contracts() -> None:
    fields = contract.TableServiceArgs.__dataclass_fields__
    assert tuple(_spec("TableService", "type")["enum"]) == contract.SERVICES
    policy = _spec("TableService", "policy")["properties"]
    assert policy["compactionStrategy"]["enum"] == list(get_args(CompactionKind))
    assert policy["clusteringStrategy"]["enum"] == list(get_args(ClusteringKind))
    assert policy["cleanPolicy"]["enum"] == list(get_args(PolicyKind))
    for crd_name, arg in (("compactionStrategy", "compaction_strategy"),
                          ("clusteringStrategy", "clustering_strategy"), ("cleanPolicy", "clean_policy"),
                          ("archiveMinInstants", "archive_min_instants"),
                          ("archiveMaxInstants", "archive_max_instants")):
        assert policy[crd_name]["default"] == fields[arg].default, crd_name


def test_kafka_enums_are_the_contracts() -> None:
    kafka = ("source", "kafka")
    assert tuple(_spec("LakeWriter", *kafka, "value", "format")["enum"]) == contract.VALUE_FORMATS
    assert tuple(_spec("LakeWriter", *kafka, "badRecords", "policy")["enum"]) == contract.BAD_RECORDS
    assert tuple(_spec("LakeWriter", *kafka, "startingOffsets")["enum"]) == contract.STARTING_OFFSETS
