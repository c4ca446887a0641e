"""A LakeTable's first reconcile creates the table at its location; every later one adopts it (the
config lakecore recorded matches the spec, column groups included); a table whose identity differs is
refused and left untouched."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import yaml

from lakecore import Table
from lakeoperator.reconcile import reconcile_table

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def example(tmp_path: Path) -> dict:
    body = yaml.safe_load((ROOT / "crds" / "examples" / "local" / "table.yaml").read_text())
    body["metadata"] |= {"namespace": "default", "uid": "u1", "generation": 1}
    body["spec"]["location"] = str(tmp_path / "customers")
    return body


def test_created_then_adopted_with_column_groups(tmp_path):
    body = example(tmp_path)
    first = reconcile_table(body, NOW)
    assert first.status["phase"] == "Ready" and any(e[1] == "Created" for e in first.events)
    body["status"] = first.status
    again = reconcile_table(body, NOW)
    assert again.status["phase"] == "Ready", again.status.get("lastError")
    assert not again.events
    groups = Table.open(body["spec"]["location"]).config.column_groups
    assert [g.name for g in groups] == ["profile", "activity"]


def test_a_table_with_another_identity_is_refused_untouched(tmp_path):
    body = example(tmp_path)
    reconcile_table(body, NOW)
    before = (Path(body["spec"]["location"]) / ".weir" / "table.json").read_bytes()
    body["spec"]["buckets"] = 8
    out = reconcile_table(body, NOW)
    assert out.status["phase"] == "Failed" and "buckets" in (out.status["lastError"] or "")
    assert (Path(body["spec"]["location"]) / ".weir" / "table.json").read_bytes() == before


def test_a_table_moved_to_another_location_is_refused_and_nothing_is_created_there(tmp_path):
    """Where no API server's rule refuses the edit (a real one does: location is immutable), the
    operator does: the table stays where its status says it is."""
    body = example(tmp_path)
    body["status"] = reconcile_table(body, NOW).status
    moved = tmp_path / "moved"
    body["spec"]["location"] = str(moved)
    out = reconcile_table(body, NOW)
    ready = next(c for c in out.status["conditions"] if c["type"] == "Ready")
    assert out.status["phase"] == "Failed" and ready["reason"] == "LocationChanged"
    assert str(tmp_path / "customers") in out.status["lastError"] and out.status["location"] == str(
        tmp_path / "customers")
    assert [e[1] for e in out.events] == ["LocationChanged"]
    assert not moved.exists()
