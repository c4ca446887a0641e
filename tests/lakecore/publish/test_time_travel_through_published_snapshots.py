"""Each published snapshot names its Weir instant: reading an earlier Iceberg snapshot (by id, or by
the time its instant completed) or an earlier Delta version gives exactly `read(as_of=<instant>)`,
in the columns the table had then (a column added later is in newer snapshots only)."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.table import StaticTable

from lakecore import Table
from lakecore.publish import delta, iceberg
from lakecore.timeline import to_epoch_ms
from tests.lakecore.publish import readers

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def test_every_published_snapshot_reads_as_of_its_instant(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    steps = [
        lambda: t.upsert(pa.table({"id": list(range(10)), "ts": [1] * 10, "v": list("abcdefghij")},
                                  schema=SCHEMA)),
        lambda: t.delete(pa.table({"id": [2, 3], "ts": [5, 0]})),  # the second delete is older: ignored
        lambda: t.maintenance.compact(),
        lambda: t.add_columns([pa.field("extra", pa.int32())]),
        lambda: t.upsert(pa.table({"id": [4, 11], "ts": [9, 9], "v": ["x", "y"], "extra": [1, 2]},
                                  schema=SCHEMA.append(pa.field("extra", pa.int32())))),
    ]
    for step in steps:
        step()
        for target in ("iceberg", "delta"):
            t.publish(target)
    table = StaticTable.from_metadata(readers.iceberg_metadata(t.uri))
    shown = {s.instant: s for s in iceberg.load(t.storage).snapshots}
    versions = {s.instant: s for s in delta.load(t.storage).snapshots}
    assert len(shown) == len(versions) == len(steps) - 1  # add_columns completes no instant
    for instant, snap in shown.items():
        weir = t.read(as_of=instant)
        by_id = readers.iceberg(t.uri, snapshot_id=snap.id)
        want = readers.expected(weir.select(by_id.column_names), "iceberg")
        readers.assert_same(by_id, want, ["id"], reader=f"iceberg snapshot of {instant}")
        at = table.snapshot_as_of_timestamp(to_epoch_ms(snap.completion))  # "as of the time it completed"
        assert at is not None and at.snapshot_id == snap.id
        got = readers.delta(t.uri, version=versions[instant].id)
        readers.assert_same(got, readers.expected(weir.select(got.column_names), "delta"), ["id"],
                            reader=f"delta version of {instant}")
    assert "extra" in readers.iceberg(t.uri).column_names
    assert "extra" not in readers.iceberg(t.uri, snapshot_id=next(iter(shown.values())).id).column_names


def test_every_iceberg_v3_snapshot_reads_as_of_its_instant(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                     table_type="merge_on_read")
    t.upsert(pa.table({"id": list(range(10)), "ts": [1] * 10, "v": list("abcdefghij")}, schema=SCHEMA))
    for step in (lambda: t.upsert(pa.table({"id": [1, 2, 12], "ts": [3] * 3, "v": ["x", "y", "z"]},
                                           schema=SCHEMA)),
                 lambda: t.delete(pa.table({"id": [3, 4], "ts": [5, 5]})),
                 lambda: t.maintenance.compact(),
                 lambda: t.upsert(pa.table({"id": [5], "ts": [9], "v": ["w"]}, schema=SCHEMA))):
        t.publish("iceberg", format_version=3)
        step()
    t.publish("iceberg", format_version=3)
    shown = iceberg.load(t.storage).snapshots
    assert len(shown) == 5
    for snap in shown:
        got = readers.iceberg(t.uri, snapshot_id=snap.id)
        readers.assert_same(got, readers.expected(t.read(as_of=snap.instant), "iceberg"), ["id"],
                            reader=f"iceberg v3 snapshot of {snap.instant}")
