"""Schema evolution of a column-group LakeTable through its spec: a new nullable column listed in one
group's columns is added to the table in that group (its writers then write it); a new column in no group
is an invalid spec (InvalidSpec, the column named, nothing touched), and so is moving a column to another
group refused (ConfigMismatch). The same rules as the CRD's, for where no API server checks them
(`weir run`)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from lakecore import Table
from lakeoperator.reconcile import reconcile_table

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
TIER = {"name": "tier", "type": "string"}


def created(tmp_path: Path) -> dict[str, Any]:
    """The customers example, created by a first reconcile and written once."""
    body = yaml.safe_load((ROOT / "crds" / "examples" / "local" / "table.yaml").read_text())
    body["metadata"] |= {"namespace": "default", "uid": "u1", "generation": 1}
    body["spec"]["location"] = str(tmp_path / "customers")
    body["status"] = reconcile_table(body, NOW).status
    assert body["status"]["phase"] == "Ready"
    Table.open(body["spec"]["location"]).upsert(pa.table({
        "customer_id": ["c1"], "name": ["Ann"], "email": ["a@x"], "profile_ts": pa.array([1], pa.int64())}))
    return body


def edited(body: dict[str, Any], *, profile: list[str], activity: list[str] | None = None,
           schema: tuple[dict[str, Any], ...] = (TIER,)) -> dict[str, Any]:
    out = copy.deepcopy(body)
    out["metadata"]["generation"] = 2
    out["spec"]["schema"] += list(schema)
    groups = out["spec"]["columnGroups"]
    groups[0]["columns"] = profile
    if activity is not None:
        groups[1]["columns"] = activity
    return out


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == kind)


def test_a_new_column_listed_in_a_group_is_added_to_the_table_in_that_group(tmp_path):
    body = edited(created(tmp_path), profile=["name", "email", "tier"])
    out = reconcile_table(body, NOW)
    assert out.status["phase"] == "Ready", out.status.get("lastError")
    assert ("Normal", "Evolved", "added column(s) tier to the table") in out.events
    table = Table.open(body["spec"]["location"])
    assert table.config.group("profile").columns == ("name", "email", "profile_ts", "tier")
    table.upsert(pa.table({"customer_id": ["c1"], "name": ["Ann"], "email": ["a@x"], "tier": ["gold"],
                           "profile_ts": pa.array([2], pa.int64())}))
    assert Table.open(body["spec"]["location"]).read(columns=["customer_id", "tier"]).to_pylist() == [
        {"customer_id": "c1", "tier": "gold"}]

    body["status"] = out.status
    again = reconcile_table(body, NOW)                    # the table matches the spec now: adopted
    assert again.status["phase"] == "Ready" and again.events == ()


def test_a_new_column_in_no_group_is_refused_and_nothing_changes(tmp_path):
    body = created(tmp_path)
    config = (Path(body["spec"]["location"]) / ".weir" / "table.json").read_bytes()
    out = reconcile_table(edited(body, profile=["name", "email"]), NOW)
    ready = condition(out.status, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert ready["message"] == ("spec.columnGroups: column(s) ['tier'] belong to no column group, and every "
                                "data column belongs to exactly one; add each to one group's columns")
    assert (Path(body["spec"]["location"]) / ".weir" / "table.json").read_bytes() == config


def test_moving_a_column_to_another_group_is_refused_and_nothing_changes(tmp_path):
    body = created(tmp_path)
    config = (Path(body["spec"]["location"]) / ".weir" / "table.json").read_bytes()
    out = reconcile_table(edited(body, profile=["name"], activity=["orders", "total_spent", "email"],
                                 schema=()), NOW)
    assert out.status["phase"] == "Failed"
    assert condition(out.status, "Ready")["reason"] == "ConfigMismatch"
    assert "column 'email' is in column group 'profile' in the table but not in the spec, and a column " \
        "never leaves its group; put it back in that group's columns" in out.status["lastError"]
    assert "column 'email' of the table is in column group 'activity' in the spec but not in the table" \
        in out.status["lastError"]
    assert (Path(body["spec"]["location"]) / ".weir" / "table.json").read_bytes() == config
