"""Switching a published Iceberg table between format versions: 2 -> 3 is a full rebuild whose
snapshot hides rows with deletion vectors, and the v2 snapshots before it still read as of their
instants; later publishes keep 3 unasked, incrementally; 3 -> 2 is refused with what to do, writing
nothing; versions Weir does not write, and a version for Delta, are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.errors import NotPublishable
from lakecore.publish import iceberg
from tests.lakecore.publish import readers

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def rows(ids: list[int], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"v{i}.{ts}" for i in ids]}, schema=SCHEMA)


@pytest.fixture
def table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                     table_type="merge_on_read")
    t.upsert(rows(list(range(20)), 1))
    t.upsert(rows([1, 2, 3], 2))
    return t


def metadata(t: Table) -> dict:
    return json.loads(Path(readers.iceberg_metadata(t.uri)).read_text())


def same_as_weir(t: Table, **scan) -> None:
    want = readers.expected(t.read(as_of=scan.pop("as_of", None)), "iceberg")
    readers.assert_same(readers.iceberg(t.uri, **scan), want, ["id"], reader=f"pyiceberg {scan}")


def test_a_v2_table_is_upgraded_by_a_full_rebuild_and_stays_v3(table: Table) -> None:
    v2 = table.publish("iceberg")
    assert v2.format_version == 2 and metadata(table)["format-version"] == 2
    assert list((Path(table.uri) / "metadata" / "deletes").glob("*.parquet"))
    v3 = table.publish("iceberg", format_version=3)  # same instant: published again, as v3
    assert not v3.up_to_date and v3.full and v3.format_version == 3
    assert metadata(table)["format-version"] == 3 and metadata(table)["next-row-id"] >= 20
    assert list((Path(table.uri) / "metadata" / "deletes").glob("*.puffin"))
    same_as_weir(table)
    same_as_weir(table, snapshot_id=v2.snapshot.id, as_of=v2.snapshot.instant)  # the v2 snapshot reads on
    assert table.publish("iceberg").up_to_date
    table.delete(pa.table({"id": [4, 5]}))
    later = table.publish("iceberg")
    assert later.format_version == 3 and not later.full
    same_as_weir(table)


def test_going_back_from_3_to_2_is_refused_and_writes_nothing(table: Table) -> None:
    table.publish("iceberg", format_version=3)
    table.delete(pa.table({"id": [7]}))
    before = sorted(p.name for p in (Path(table.uri) / "metadata").rglob("*"))
    with pytest.raises(NotPublishable, match=r"format version 3, which cannot go back to 2; publish it as "
                                             r"version 3, or delete its metadata/ directory"):
        table.publish("iceberg", format_version=2)
    assert sorted(p.name for p in (Path(table.uri) / "metadata").rglob("*")) == before
    assert table.publish("iceberg").format_version == 3  # unasked: the version it is published in


def test_the_remedy_for_a_downgrade_publishes_version_2_from_scratch(table: Table) -> None:
    import shutil

    table.publish("iceberg", format_version=3)
    shutil.rmtree(Path(table.uri) / iceberg.METADATA_DIR)
    assert table.publish("iceberg", format_version=2).format_version == 2
    same_as_weir(table)


def test_versions_weir_does_not_write_and_a_version_for_delta_are_refused(table: Table) -> None:
    with pytest.raises(NotPublishable, match="format version 4 is not one Weir publishes; use 2 or 3"):
        table.publish("iceberg", format_version=4)
    with pytest.raises(NotPublishable, match="format version 3 is Iceberg's; a delta table has none"):
        table.publish("delta", format_version=3)
    assert not (Path(table.uri) / iceberg.METADATA_DIR).exists()
