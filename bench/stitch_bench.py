"""Stitched storage vs query-time joins: three streams fill one wide partial-update table.

    python bench/stitch_bench.py [--keys N] [--reps N]

Each stream carries its own column group (guarded by its own event-time field) for every key. The
floor is what a query engine does without stitched storage: pyarrow full-outer-joining the three
streams' latest values. lakecore reads the merge-on-read table (three log sets merged per bucket).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import median, timed

from lakecore import ColumnGroup, Table

GROUPS = [ColumnGroup("a", ("a_int", "a_float"), "a_ts"), ColumnGroup("b", ("b_str", "b_int"), "b_ts"),
          ColumnGroup("c", ("c_float", "c_str"), "c_ts")]


def streams(n: int) -> list[pa.Table]:
    rng = np.random.default_rng(20261122)
    out = []
    for g in GROUPS:
        keys = rng.permutation(n).astype(np.int64)
        cols: dict[str, pa.Array] = {"key": pa.array(keys)}
        for c in g.columns:
            if c.endswith("int"):
                cols[c] = pa.array(rng.integers(0, 1 << 40, n))
            elif c.endswith("float"):
                cols[c] = pa.array(rng.random(n))
            else:
                cols[c] = pa.array(np.char.add("v", rng.integers(0, 10**7, n).astype(str)))
        cols[g.ordering_field] = pa.array(rng.integers(0, 1 << 30, n))
        out.append(pa.table(cols))
    return out


def schema() -> pa.Schema:
    fields = [pa.field("key", pa.int64())]
    for g in GROUPS:
        for c in (*g.columns, g.ordering_field):
            if c.endswith(("int", "ts")):
                fields.append(pa.field(c, pa.int64()))
            else:
                fields.append(pa.field(c, pa.float64() if c.endswith("float") else pa.string()))
    return pa.schema(fields)


def join(parts: list[pa.Table]) -> pa.Table:
    out = parts[0]
    for p in parts[1:]:
        out = out.join(p, "key", join_type="full outer")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    parts = streams(a.keys)
    with tempfile.TemporaryDirectory() as d:
        table = Table.create(os.path.join(d, "wide"), schema=schema(), record_key="key", column_groups=GROUPS,
                             buckets=4)
        write_s = [timed(lambda p=p: table.upsert(p))[0] for p in parts]
        joins, reads = [], []
        for _ in range(a.reps):
            joins.append(timed(lambda: join(parts))[0])
            s, result = timed(table.read)
            reads.append(s)
        expected = join(parts).select(result.column_names).sort_by("key")
        assert result.sort_by("key").equals(expected), "stitched read differs from the join"
    res = {"keys": a.keys, "stream_writes_s": [round(x, 3) for x in write_s],
           "join_floor_s": round(median(joins), 4), "stitched_read_s": round(median(reads), 4),
           "ratio stitched_read / join": round(median(reads) / median(joins), 3), "bar": "< 1.0"}
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
