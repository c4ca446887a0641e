"""Reading a merge-on-read table of many small file groups (issue 27): small slices read and merged
together against each slice alone, as ratios against a floor measured in the same run.

    python bench/small_slices_bench.py [--rows N] [--partitions P] [--buckets B] [--reps R] [--dir D]
                                       [--compact] [--quick]

The table is shaped like the scan benchmark's (the peers' columns, a partition at a time, each file group
a base from a bulk insert and a log from an upsert of 10% of its rows), but with many small file groups:
by default 400k rows in 25 partitions x 16 buckets, 400 slices of ~1,100 stored rows, 800 data files.
`--compact` compacts it first (400 slices of one base file each). Timed in this process, alternating,
each a median of `--reps` after one warm-up: `Table.read()`; the same read with every slice merged
alone (`SMALL_SLICE_ROWS` = 0, how reads ran before); and the floor, pyarrow reading the same data
files (base and logs, every column, nothing merged) as one dataset. Rows are checked equal between
the two reads. Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import alternated, median
from scan_bench import build

from lakecore import Table
from lakecore.read import scan as scan_module


def slice_by_slice(read: Callable[[], pa.Table]) -> pa.Table:
    saved = scan_module.SMALL_SLICE_ROWS
    scan_module.SMALL_SLICE_ROWS = 0
    try:
        return read()
    finally:
        scan_module.SMALL_SLICE_ROWS = saved


def floor_read(paths: list[str]) -> pa.Table:
    import pyarrow.dataset as ds

    return ds.dataset(paths, format="parquet").to_table()


def sorted_rows(table: pa.Table) -> pa.Table:
    return table.sort_by([(c, "ascending") for c in table.column_names])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--partitions", type=int, default=25)
    ap.add_argument("--buckets", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--dir", default=None, help="keep the table here (built once, reused)")
    ap.add_argument("--compact", action="store_true", help="compact the table first: one base per slice")
    ap.add_argument("--quick", action="store_true", help="smoke run: 20k rows, 5 x 4 slices")
    a = ap.parse_args()
    if a.quick:
        a.rows, a.partitions, a.buckets, a.reps = 20_000, 5, 4, 1
    work = a.dir or tempfile.mkdtemp(prefix="weir-small-slices-")
    uri = os.path.join(work, f"t{a.rows}-{a.partitions}x{a.buckets}{'-compacted' if a.compact else ''}")
    try:
        if not os.path.exists(uri):
            build(uri, a.rows, a.partitions, a.buckets)
            if a.compact:
                Table.open(uri).maintenance.compact()
        table = Table.open(uri)
        scan = table.scan()
        paths = [f"{uri}/{f.path}" for fs in scan.slices for f in fs.files]
        readers: dict[str, Callable[[], pa.Table]] = {
            "lakecore": table.read, "slice_by_slice": lambda: slice_by_slice(table.read),
            "floor": lambda: floor_read(paths)}
        together, alone = table.read(), slice_by_slice(table.read)
        assert sorted_rows(together).equals(sorted_rows(alone)), "the two reads differ"
        alternated(readers, 1)  # warm-up
        runs, _ = alternated(readers, a.reps)
        m = {name: median(s) for name, s in runs.items()}
        out: dict[str, Any] = {
            "rows": together.num_rows, "slices": len(scan.slices), "data_files": len(paths),
            "units": len(scan_module.read_units(scan.plan)), "compacted": a.compact,
            "load_avg_at_start": list(os.getloadavg()),
            **{f"{name}_s": round(s, 4) for name, s in m.items()},
            "lakecore_vs_floor": round(m["lakecore"] / m["floor"], 2),
            "slice_by_slice_vs_floor": round(m["slice_by_slice"] / m["floor"], 2),
            "lakecore_vs_slice_by_slice": round(m["lakecore"] / m["slice_by_slice"], 2),
            "runs": runs}
        print(f"{out['rows']} rows in {out['slices']} slices ({out['data_files']} files, "
              f"{out['units']} units): read {out['lakecore_s']} s, slice by slice "
              f"{out['slice_by_slice_s']} s, floor {out['floor_s']} s", file=sys.stderr)
        print(json.dumps(out, indent=1))
    finally:
        if a.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
