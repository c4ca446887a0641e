"""Compaction of a merge-on-read table vs a pyarrow floor, and the snapshot read it buys.

    python bench/compaction_bench.py [--reps N] [--rows N] [--commits N] [--commit-rows N]

Table: the peers' 1M rows bulk-inserted into a merge-on-read table with 4 buckets, then 10 delta
commits of 100k rows each (50% updates of live keys with a newer ts, 50% new keys).
Floors, measured in the same run on the same files:
  compaction: pyarrow reads every base and log file of the table, concatenates them, and writes
              the final snapshot rows once (one zstd Parquet file);
  read:       pyarrow reads that one file (the same rows the compacted table holds).
Bars: compaction <= 2x its floor, snapshot read after compaction <= 1.2x its floor.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import datagen, median, timed

from lakecore import Table
from lakecore.concurrency import view_of
from lakecore.services import run_compaction, schedule_compaction

CODEC = "zstd"
BUCKETS = 4


def commits(base: pa.Table, n_commits: int, n_rows: int) -> list[pa.Table]:
    dg = datagen()
    rng = np.random.default_rng(dg.SEED + 1)
    live = base["key"].to_numpy()
    top = int(live.max()) + 1
    out = []
    for i in range(n_commits):
        n_upd = n_rows // 2
        upd = rng.choice(live, n_upd, replace=False)
        new = np.arange(top, top + n_rows - n_upd, dtype=np.int64)
        top += len(new)
        live = np.concatenate([live, new])
        keys = np.concatenate([upd, new])
        rng.shuffle(keys)
        out.append(dg.make_table(keys, np.full(n_rows, i + 2, np.int64), rng, f"c{i % 10}"))
    return out


def build(path: str, base: pa.Table, batches: list[pa.Table]) -> Table:
    table = Table.create(path, schema=base.schema, record_key="key", ordering_field="ts", buckets=BUCKETS,
                         compression=CODEC)
    table.bulk_insert(base)
    for b in batches:
        table.upsert(b)
    return table


def one_rep(work: str, base: pa.Table, batches: list[pa.Table]) -> dict[str, float]:
    table = build(os.path.join(work, "lake"), base, batches)
    view = view_of(table.storage, table.timeline())
    files = [os.path.join(work, "lake", f.path) for s in view.slices for f in s.files]
    expected = table.read()
    floor_file = os.path.join(work, "floor.parquet")

    def floor_compaction() -> None:
        parts = [pq.read_table(f) for f in files]
        merged = pa.concat_tables(parts, promote_options="default")
        del merged
        pq.write_table(expected, floor_file, compression=CODEC)

    def compaction() -> None:
        plan = schedule_compaction(table.storage, table.config, table.lock)
        assert plan is not None
        run_compaction(table.storage, table.config, table.lock, plan)

    r: dict[str, float] = {"files": float(len(files))}
    r["floor_compaction"], _ = timed(floor_compaction)
    r["compaction"], _ = timed(compaction)
    assert all(not s.logs for s in view_of(table.storage, table.timeline()).slices)
    r["floor_read"], _ = timed(lambda: pq.read_table(floor_file))
    r["read_after_compaction"], got = timed(table.read)
    assert got.num_rows == expected.num_rows, (got.num_rows, expected.num_rows)
    assert pc.sum(got["i1"]).as_py() == pc.sum(expected["i1"]).as_py()
    return r


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--commits", type=int, default=10)
    ap.add_argument("--commit-rows", type=int, default=100_000)
    args = ap.parse_args()
    base, _ = datagen().base_and_upsert(args.rows, 1)
    batches = commits(base, args.commits, args.commit_rows)
    reps = []
    for _ in range(args.reps):
        work = tempfile.mkdtemp(prefix="weir-compaction-bench-")
        try:
            reps.append(one_rep(work, base, batches))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    med = {k: median([r[k] for r in reps]) for k in reps[0]}
    ratios = {"compaction_vs_floor": med["compaction"] / med["floor_compaction"],
              "read_after_compaction_vs_floor": med["read_after_compaction"] / med["floor_read"]}
    bars = {"compaction_vs_floor": 2.0, "read_after_compaction_vs_floor": 1.2}
    print(json.dumps({"rows": args.rows, "commits": args.commits, "commit_rows": args.commit_rows,
                      "buckets": BUCKETS, "reps": args.reps, "seconds": med, "ratios": ratios,
                      "bars": bars, "within_bars": {k: ratios[k] <= bars[k] for k in bars}}, indent=2))


if __name__ == "__main__":
    main()
