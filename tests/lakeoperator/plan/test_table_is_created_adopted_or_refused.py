"""LakeTable: create when absent, adopt when table.json matches, evolve what may change, refuse the rest."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lakecore.config import FORMAT_VERSION, TableConfig
from lakecore.errors import InvalidTableConfig
from lakeoperator.plan.table import (
    COMPARED_KEYS,
    TableAction,
    TablePlan,
    columns_to_add,
    deletion_action,
    desired_config,
    plan_table,
    refused_changes,
)
from lakeoperator.specs import LakeTableSpec, ObjectRef, parse_lake_table
from tests.lakeoperator.bodies import lake_table

REF = ObjectRef("lake", "orders", "uid-t", 1)


def table(**spec: Any) -> LakeTableSpec:
    return parse_lake_table(lake_table(**spec))


def plan(spec: LakeTableSpec, observed: dict[str, Any] | TableConfig | None) -> TablePlan:
    """The plan for `spec` against a table whose table.json holds `observed` (None: no table)."""
    if isinstance(observed, dict):
        observed = TableConfig.from_json(observed)
    return plan_table(desired_config(spec, "orders"), observed)


# what lakecore's TableConfig.to_json() writes for the spec in bodies.lake_table()
GOLDEN: dict[str, Any] = {
    "format_version": FORMAT_VERSION, "name": "orders", "compression": "zstd", "column_defaults": {},
    "table_type": "merge_on_read", "record_key": ["id"], "partition_fields": ["day"],
    "ordering_field": None, "merge_mode": "commit_time", "column_groups": [], "buckets": 4,
    "concurrency_mode": "optimistic", "tombstone_retention_hours": None, "lock": {"provider": "storage"},
    "schema": [{"name": "id", "nullable": False, "id": 1, "type": "int64"},
               {"name": "ts", "nullable": True, "id": 2, "type": "timestamp", "unit": "us", "tz": "UTC"},
               {"name": "amount", "nullable": True, "id": 3, "type": "decimal", "precision": 12, "scale": 2},
               {"name": "day", "nullable": True, "id": 4, "type": "string"}],
}


def test_desired_config_is_table_json_shaped() -> None:
    desired = desired_config(table(), "orders").to_json()
    assert {k: desired[k] for k in COMPARED_KEYS} == {k: v for k, v in GOLDEN.items() if k in COMPARED_KEYS}


def test_desired_config_matches_what_lakecore_writes() -> None:
    from lakecore.config import LockSpec, schema_from_json

    spec = table(orderingField="ts", buckets=8, lock={"provider": "zookeeper",
                                                      "zookeeper": {"connect": "zk:2181", "path": "/weir/o"}})
    desired = desired_config(spec, "orders")
    written = TableConfig(name="orders", schema=schema_from_json(desired.to_json()["schema"]),
                          record_key=("id",), partition_fields=("day",), ordering_field="ts",
                          merge_mode="event_time", buckets=8,
                          lock=LockSpec("zookeeper", "zk:2181", "/weir/o"))
    assert plan(spec, written).action is TableAction.ADOPT
    assert str(desired.schema.field("ts").type) == "timestamp[us, tz=UTC]"


def test_a_table_whose_columns_carry_other_field_ids_is_adopted() -> None:
    """Field ids are the table's own (numbered in table.json's order as columns came): a spec listing
    the same columns in another order is the same table, not a retype of every column."""
    spec = table()
    observed = copy.deepcopy(GOLDEN)
    observed["schema"] = [dict(c, id=i) for i, c in enumerate(reversed(GOLDEN["schema"]), start=1)]
    assert plan(spec, observed).action is TableAction.ADOPT


def test_a_spec_lakecore_refuses_cannot_be_translated() -> None:
    with pytest.raises(InvalidTableConfig, match="record_key column 'day'"):
        desired_config(table(recordKey=["day"], partitionFields=[], schema=[
            {"name": "day", "type": "float64", "nullable": False}]), "orders")


def test_absent_table_is_created() -> None:
    created = plan(table(), None)
    assert created.action is TableAction.CREATE and created.desired == desired_config(table(), "orders")


def test_matching_table_is_adopted() -> None:
    assert plan(table(), GOLDEN).action is TableAction.ADOPT
    zk_in_other_order = table(lock={"provider": "zookeeper", "zookeeper": {"connect": "b:2181,a:2181"}})
    observed = GOLDEN | {"lock": {"provider": "zookeeper", "connect": "a:2181,b:2181", "path": "/weir/x"}}
    assert plan(zk_in_other_order, observed).action is TableAction.ADOPT


def test_a_new_nullable_column_and_another_lock_are_evolved() -> None:
    spec = table(schema=[*lake_table()["spec"]["schema"], {"name": "note", "type": "string"}],
                 lock={"provider": "zookeeper", "zookeeper": {"connect": "zk:2181"}})
    evolved = plan(spec, GOLDEN)
    assert evolved.action is TableAction.EVOLVE
    assert [(m.field, m.severity) for m in evolved.mismatches] == [("lock", "evolvable"),
                                                                    ("schema.note", "evolvable")]


def _observed(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(GOLDEN)
    out.update(changes)
    return out


@pytest.mark.parametrize(("observed", "field"), [
    (_observed(table_type="copy_on_write"), "table_type"),
    (_observed(record_key=["id", "ts"]), "record_key"),
    (_observed(partition_fields=[]), "partition_fields"),
    (_observed(buckets=16), "buckets"),
    (_observed(ordering_field="ts", merge_mode="event_time"), "ordering_field"),
    (_observed(concurrency_mode="non_blocking"), "concurrency_mode"),
    (_observed(schema=[*GOLDEN["schema"], {"name": "gone", "nullable": True, "type": "int32"}]),
     "schema.gone"),
    (_observed(schema=[{"name": "id", "nullable": False, "type": "int32"}, *GOLDEN["schema"][1:]]),
     "schema.id"),
    (_observed(schema=[*GOLDEN["schema"][:3], {"name": "day", "nullable": False, "type": "string"}]),
     "schema.day"),
])
def test_differences_that_cannot_change_are_refused(observed: dict[str, Any], field: str) -> None:
    refused = plan(table(), observed)
    assert refused.action is TableAction.REFUSE
    assert field in [m.field for m in refused.refused]
    assert all(any(w in m.message for w in ("fix", "put", "add", "point")) for m in refused.refused)


def test_a_new_column_that_is_not_nullable_is_refused() -> None:
    note = {"name": "note", "type": "string", "nullable": False}
    spec = table(schema=[*lake_table()["spec"]["schema"], note])
    assert plan(spec, GOLDEN).action is TableAction.REFUSE


@pytest.mark.parametrize(("change", "refused"), [
    ({"deletionPolicy": "Delete"}, 0),
    ({"heartbeat": {"intervalSeconds": 5}}, 0),
    ({"schema": [*lake_table()["spec"]["schema"], {"name": "note", "type": "string"}]}, 0),
    ({"location": "s3://lake/other"}, 1),
    ({"buckets": 8}, 1),
    ({"tableType": "copy_on_write"}, 1),
    ({"recordKey": ["id", "day"], "partitionFields": []}, 2),
    ({"schema": lake_table()["spec"]["schema"][:3], "partitionFields": []}, 2),   # drops column day
])
def test_spec_updates_of_identity_fields_are_refused(change: dict[str, Any], refused: int) -> None:
    reasons = refused_changes(table(), table(**change))
    assert len(reasons) == refused
    assert all("revert" in r or "add it back" in r for r in reasons)


@pytest.mark.parametrize(("policy", "managed", "action"), [
    ("Retain", True, "retain"), ("Delete", True, "delete"), ("Delete", False, "retain"),
    ("Retain", False, "retain")])
def test_deletion_deletes_data_only_when_asked_and_managed(policy: str, managed: bool, action: str) -> None:
    ref = ObjectRef("lake", "orders", "u", 1, managed=managed)
    assert deletion_action(table(deletionPolicy=policy), ref) == action


GROUPED = {"schema": [{"name": "id", "type": "int64", "nullable": False}, {"name": "a", "type": "string"},
                      {"name": "a_ts", "type": "int64"}, {"name": "b", "type": "string"},
                      {"name": "b_ts", "type": "int64"}],
           "partitionFields": [],
           "columnGroups": [{"name": "ga", "orderingField": "a_ts", "columns": ["a"]},
                            {"name": "gb", "orderingField": "b_ts", "columns": ["b"]}]}
NOTE = {"name": "note", "type": "string"}


def grouped(a: list[str], b: list[str], *extra: dict[str, Any]) -> LakeTableSpec:
    return table(**{**GROUPED, "schema": [*GROUPED["schema"], *extra],
                    "columnGroups": [{"name": "ga", "orderingField": "a_ts", "columns": a},
                                     {"name": "gb", "orderingField": "b_ts", "columns": b}]})


def test_a_new_column_joins_its_group_and_an_evolution_adds_it_there() -> None:
    new = grouped(["a", "note"], ["b"], NOTE)
    assert refused_changes(grouped(["a"], ["b"]), new) == ()
    evolved = plan(new, desired_config(grouped(["a"], ["b"]), "orders"))
    assert evolved.action is TableAction.EVOLVE
    assert [m.message for m in evolved.mismatches] == [
        "column 'note' is new: the operator adds it (nullable) to column group 'ga'"]
    assert columns_to_add(evolved) == ([{"name": "note", "nullable": True, "type": "string"}], {"note": "ga"})


def test_a_column_never_leaves_its_group_nor_joins_another() -> None:
    reasons = refused_changes(grouped(["a", "note"], ["b"], NOTE), grouped(["a"], ["b", "note"], NOTE))
    assert reasons == (
        "column 'note' is in column group 'ga' in the table but not in the spec, and a column never leaves "
        "its group; put it back in that group's columns",
        "column 'note' of the table is in column group 'gb' in the spec but not in the table, and a column "
        "never joins another group; take it out of that group")


def test_a_key_columns_nullable_is_no_mismatch_but_another_columns_is() -> None:
    """`weir table create --schema id:int64,...` marks no column non-null; a spec saying `nullable: false`
    for its record key adopts that table (a write refuses a null key whatever the column says)."""
    made_by_the_cli = copy.deepcopy(GOLDEN)
    made_by_the_cli["schema"][0]["nullable"] = True
    assert plan(table(), made_by_the_cli).action == TableAction.ADOPT
    other = copy.deepcopy(GOLDEN)
    other["schema"][3]["nullable"] = False
    refused = plan(table(), other)
    assert refused.action == TableAction.REFUSE
    assert [m.message for m in refused.refused] == [
        "column 'day' differs in nullable (table: False); put the table's value in the spec"]
