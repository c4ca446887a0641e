"""spec.tombstoneRetentionHours is a tuning knob: an edit sets it in table.json (lakecore's
set_tombstone_retention, under the table lock), with an Event, and the next pass has nothing to do;
removing the field keeps tombstones for ever again. It wedged the table (Failed, ConfigMismatch, "has
tombstone_retention_hours None ... it cannot change"), and no writer or service started meanwhile. A
refusal of what cannot change names the spec's field, not table.json's key."""

from __future__ import annotations

import copy
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.errors import InvalidTableConfig
from lakeoperator.reconcile import reconcile_table
from tests.lakeoperator.test_a_table_spec_edit_changes_its_codec import NOW, SCHEMA, table_body


def retention_events(events: tuple[tuple[str, str, str], ...]) -> list[str]:
    return [m for kind, reason, m in events if (kind, reason) == ("Normal", "TombstoneRetentionChanged")]


def test_an_edit_sets_the_tombstone_retention_and_removing_it_keeps_tombstones(tmp_path: Path) -> None:
    location = tmp_path / "orders"
    body = table_body(location)
    out = reconcile_table(body, NOW)
    assert out.status["phase"] == "Ready"
    assert Table.open(str(location)).config.tombstone_retention_hours is None

    edited = copy.deepcopy(body)
    edited["metadata"]["generation"], edited["spec"]["tombstoneRetentionHours"] = 2, 24
    edited["status"] = out.status
    out = reconcile_table(edited, NOW)
    assert out.status["phase"] == "Ready", out.status.get("lastError")
    assert retention_events(out.events) == ["tombstones are kept 24 hours in rewrites from now on (was for "
                                            "ever)"]
    assert Table.open(str(location)).config.tombstone_retention_hours == 24
    edited["status"] = out.status
    assert reconcile_table(edited, NOW).events == ()

    removed = copy.deepcopy(body)
    removed["metadata"]["generation"], removed["status"] = 3, out.status
    out = reconcile_table(removed, NOW)
    assert out.status["phase"] == "Ready" and retention_events(out.events) == [
        "tombstones are kept for ever in rewrites from now on (was 24 hours)"]
    assert Table.open(str(location)).config.tombstone_retention_hours is None


def test_what_cannot_change_is_named_as_the_spec_names_it(tmp_path: Path) -> None:
    location = tmp_path / "orders"
    Table.create(str(location), schema=SCHEMA, record_key="id", name="orders", table_type="copy_on_write")
    out = reconcile_table(table_body(location, tableType="merge_on_read"), NOW)
    assert out.status["phase"] == "Failed"
    assert "the table at this location has tableType 'copy_on_write', the spec 'merge_on_read'" in \
        out.status["lastError"]


def test_a_handle_opened_before_takes_the_retention_up_at_its_next_commit(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    older = Table.open(t.uri)
    assert t.set_tombstone_retention(0.5) == 0.5
    older.upsert(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    assert older.config.tombstone_retention_hours == 0.5
    with pytest.raises(InvalidTableConfig, match="tombstone_retention_hours must be a number >= 0"):
        t.set_tombstone_retention(-1)
    assert Table.open(t.uri).config.tombstone_retention_hours == 0.5
