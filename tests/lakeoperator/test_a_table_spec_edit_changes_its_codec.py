"""spec.compression is the Parquet codec of the files written from then on: a LakeTable adopting a table
of another codec sets the spec's (never refuses), a spec edit changes it (lakecore's set_compression, under
the table lock), each with an Event; the next pass has nothing to do. A spec without one leaves the
table's codec as it is (adopting, or after the field is removed); a new table gets zstd. A codec the CRD
does not offer is refused where no API server checks (the local runner)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import Table
from lakeoperator.reconcile import reconcile_table
from lakeoperator.specs import SpecError, parse_lake_table

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def table_body(location: Path, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable",
            "metadata": {"name": "orders", "namespace": "default", "uid": "u1", "generation": 1},
            "spec": {"location": str(location), "recordKey": ["id"],
                     "schema": [{"name": "id", "type": "int64", "nullable": False},
                                {"name": "v", "type": "string"}], **spec}}


def changed(events: tuple[tuple[str, str, str], ...]) -> list[str]:
    return [message for kind, reason, message in events if (kind, reason) == ("Normal", "CompressionChanged")]


def test_adopting_a_table_of_another_codec_sets_the_specs_then_an_edit_changes_it(tmp_path: Path) -> None:
    location = tmp_path / "orders"
    Table.create(str(location), schema=SCHEMA, record_key="id", name="orders", compression="lz4")
    body = table_body(location, compression="zstd")
    out = reconcile_table(body, NOW)
    assert out.status["phase"] == "Ready", out.status.get("lastError")
    assert changed(out.events) == ["files written from now on use zstd (was lz4); files written before keep "
                                   "theirs"]
    assert Table.open(str(location)).config.compression == "zstd"

    edited = copy.deepcopy(body)
    edited["metadata"]["generation"], edited["spec"]["compression"] = 2, "snappy"
    edited["status"] = out.status
    out = reconcile_table(edited, NOW)
    assert out.status["phase"] == "Ready" and changed(out.events), out.events
    assert Table.open(str(location)).config.compression == "snappy"
    edited["status"] = out.status
    assert reconcile_table(edited, NOW).events == ()   # the table writes the spec's codec: nothing to do


def test_a_spec_without_a_codec_keeps_the_tables_own_and_a_new_table_gets_zstd(tmp_path: Path) -> None:
    location = tmp_path / "orders"
    Table.create(str(location), schema=SCHEMA, record_key="id", name="orders", compression="lz4")
    out = reconcile_table(table_body(location), NOW)   # adopted: the spec names no codec
    assert out.status["phase"] == "Ready" and changed(out.events) == [], out.events
    assert Table.open(str(location)).config.compression == "lz4"

    named = table_body(location, compression="snappy")
    out = reconcile_table(named, NOW)
    assert Table.open(str(location)).config.compression == "snappy"
    removed = table_body(location)   # the field removed again: nothing changes
    removed["metadata"]["generation"], removed["status"] = 3, out.status
    assert changed(reconcile_table(removed, NOW).events) == []
    assert Table.open(str(location)).config.compression == "snappy"

    fresh = tmp_path / "fresh"
    assert reconcile_table(table_body(fresh), NOW).status["phase"] == "Ready"
    assert Table.open(str(fresh)).config.compression == "zstd"


@pytest.mark.parametrize("codec", ["brotli", "lzo"])
def test_a_codec_the_crd_does_not_offer_is_refused(tmp_path: Path, codec: str) -> None:
    with pytest.raises(SpecError, match=rf"spec.compression: '{codec}' is not one of zstd, lz4, snappy, "
                       "gzip, none"):
        parse_lake_table(table_body(tmp_path / "orders", compression=codec))
