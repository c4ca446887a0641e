"""A merge-on-read table for the scan tests: two partitions of bases with logs (upserts and deletes in
every bucket) and a partition of logs only, so a scan meets every kind of slice."""

from __future__ import annotations

import pyarrow as pa

from lakecore import Table

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("part", pa.string()), ("name", pa.string()),
                    ("value", pa.float64())])


def part_rows(ids: range | list[int], ts: int, part: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "part": pa.array([part] * len(ids)), "name": pa.array([f"{part}{i}@{ts}" for i in ids]),
                     "value": pa.array([i * 0.5 + ts for i in ids], pa.float64())})


def merge_on_read_table(uri: str, *, buckets: int = 4, rows: int = 400) -> Table:
    t = Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", partition_fields=["part"],
                     buckets=buckets)
    half = rows // 2
    t.bulk_insert(pa.concat_tables([part_rows(range(half), 1, "a"), part_rows(range(half, rows), 1, "b")]))
    t.upsert(pa.concat_tables([part_rows(range(0, half, 3), 2, "a"),
                               part_rows(range(half, rows, 5), 2, "b")]))
    t.delete(pa.table({"id": pa.array(range(1, rows, 7), pa.int64()),
                       "part": pa.array(["a" if i < half else "b" for i in range(1, rows, 7)])}))
    t.insert(part_rows(range(rows, rows + 50), 3, "c"))        # a new partition: logs only
    t.upsert(part_rows(range(rows + 10, rows + 30), 4, "c"))
    return t
