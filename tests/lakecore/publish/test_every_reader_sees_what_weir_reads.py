"""After every kind of write and table service, pyiceberg, deltalake's DataFusion reader and polars read
exactly what `Table.read()` returns at the same instant (row for row, types as the type map says), on
tables of both types, both one-group merge modes, partitioned and not. Publishing is incremental
after the first step; a full rebuild of the same instant must agree too."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.services import CleanPolicy
from tests.lakecore.publish import readers

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("ts", pa.int64()), ("name", pa.string()),
                    ("score", pa.float64()), ("small", pa.int8())])


def rows(ids: list[int], ts: int, tag: str) -> pa.Table:
    return pa.table({"id": ids, "dt": [f"d{i % 3}" for i in ids], "ts": [ts] * len(ids),
                     "name": [f"{tag}{i}" for i in ids], "score": [i / 2 for i in ids],
                     "small": [i % 100 for i in ids]}, schema=SCHEMA)


def keys(ids: list[int], ts: int) -> pa.Table:
    return pa.table({"id": ids, "dt": [f"d{i % 3}" for i in ids], "ts": [ts] * len(ids)},
                    schema=pa.schema([SCHEMA.field("id"), SCHEMA.field("dt"), SCHEMA.field("ts")]))


def check(table: Table, step: str, *, sample: bool = False) -> None:
    want = table.read()
    for target in ("iceberg", "delta"):
        result = table.publish(target)
        assert result.snapshot.instant == table.timeline().last_completed().requested_time
    for reader in ("iceberg", "delta", *(["polars"] if sample else [])):
        got = readers.READERS[reader](table.uri)
        readers.assert_same(got, readers.expected(want, readers.TARGET_OF[reader]), ["id"],
                            reader=f"{reader} after {step}")


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
@pytest.mark.parametrize("ordering", [None, "ts"])
@pytest.mark.parametrize("partitioned", [True, False])
def test_readers_match_after_every_write(tmp_path, table_type, ordering, partitioned):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", table_type=table_type,
                     partition_fields=["dt"] if partitioned else [], ordering_field=ordering, buckets=2)
    t.bulk_insert(rows(list(range(40)), 10, "a"))
    check(t, "bulk_insert")
    t.upsert(rows(list(range(0, 60, 3)), 20, "b"))
    check(t, "upsert")
    t.upsert(rows([1, 2], 5, "late"))  # older events: lose under event-time ordering
    t.delete(keys([4, 5, 6, 100], 30))
    check(t, "delete")
    if table_type == "merge_on_read":
        t.maintenance.compact()
        check(t, "compaction")
    t.insert(rows([7, 200, 201], 40, "c"))
    t.delete(keys([9], 1))  # an event-time delete older than the row: ignored
    check(t, "insert and delete")
    t.maintenance.cluster()
    check(t, "clustering")
    t.upsert(rows([10, 11], 50, "d"))
    t.maintenance.clean(CleanPolicy("keep_latest_commits", 1), dry_run=False)
    check(t, "clean")
    t.insert_overwrite(rows([12, 15], 60, "e"))
    check(t, "insert_overwrite", sample=True)


def test_a_full_rebuild_shows_the_same_rows(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    t.bulk_insert(rows(list(range(30)), 10, "a"))
    t.publish("iceberg")
    t.publish("delta")
    t.upsert(rows(list(range(0, 30, 2)), 20, "b"))
    t.delete(keys([1, 3], 30))
    incremental = {target: t.publish(target) for target in ("iceberg", "delta")}
    assert not any(r.full for r in incremental.values())
    got = {target: readers.READERS[target](t.uri) for target in ("iceberg", "delta")}
    for sub in ("metadata", "_delta_log", "_delta_dv"):
        shutil.rmtree(tmp_path / "t" / sub)
    for target in ("iceberg", "delta"):
        assert t.publish(target).full
        readers.assert_same(readers.READERS[target](t.uri), got[target], ["id"], reader=f"{target} rebuilt")
