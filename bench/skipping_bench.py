"""Data skipping benchmark (issue 27): a filter selecting 1% of the rows by a non-partition column of a
clustered table reads <= 10% of the bytes a whole read does.

The table is bucketed by its key (so every file group holds the whole range of the filtered column),
bulk inserted, then clustered sorted by that column into small row groups: file skipping alone cannot
help here, the row groups' statistics do. Bytes are counted on the real local filesystem as Arrow
reads them (footers included), for the filtered read and for the whole read in the same run; the
result is checked against the whole read filtered. Prints one JSON object. Not a test; run it by hand:

    PYTHONPATH=. .venv/bin/python bench/skipping_bench.py [--rows N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from lakecore import Table  # noqa: E402
from lakecore.services.clustering_plan import ClusteringStrategy  # noqa: E402
from tests.support.read_counting import CountingStorage  # noqa: E402

BAR = 0.10
SELECTED = 0.01


def rows(n: int, seed: int = 27) -> pa.Table:
    rng = np.random.default_rng(seed)
    letters = rng.integers(ord("a"), ord("z") + 1, size=n * 12, dtype=np.uint8)
    offsets = np.arange(0, 12 * n + 1, 12, dtype=np.int32)
    return pa.table({
        "id": pa.array(np.arange(n), pa.int64()),
        "metric": pa.array(rng.random(n), pa.float64()),
        "count": pa.array(rng.integers(0, 1 << 40, n), pa.int64()),
        "name": pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(letters)),
        "ts": pa.array(rng.integers(0, 1 << 40, n), pa.int64()).cast(pa.timestamp("us")),
    })


def run(n: int, buckets: int, row_group_rows: int) -> dict[str, object]:
    work = tempfile.mkdtemp(prefix="weir-skipping-")
    try:
        uri = os.path.join(work, "t")
        created = Table.create(uri, schema=rows(1).schema, record_key="id", buckets=buckets)
        storage = CountingStorage(uri)
        table = Table(storage, created.config)
        table.bulk_insert(rows(n))
        table.maintenance.cluster(ClusteringStrategy(kind="all", sort_columns=("metric",),
                                                     row_group_rows=row_group_rows))
        storage.reset()
        start = time.perf_counter()
        whole = table.read()
        whole_s, whole_bytes = time.perf_counter() - start, storage.bytes_read
        expr = (pc.field("metric") >= 0.5) & (pc.field("metric") < 0.5 + SELECTED)
        storage.reset()
        start = time.perf_counter()
        got = table.read(filter=expr)
        filtered_s, filtered_bytes = time.perf_counter() - start, storage.bytes_read
        expected = whole.filter(expr)
        same = got.sort_by("id").equals(expected.sort_by("id"))
        ratio = filtered_bytes / whole_bytes
        return {"rows": n, "buckets": buckets, "row_group_rows": row_group_rows,
                "selected_rows": got.num_rows, "selected_share": round(got.num_rows / n, 4),
                "whole_read": {"bytes": whole_bytes, "seconds": round(whole_s, 3)},
                "filtered_read": {"bytes": filtered_bytes, "seconds": round(filtered_s, 3),
                                  "files_opened": len(storage.opened)},
                "bytes_ratio": round(ratio, 4), "bar": BAR, "ok": bool(same and ratio <= BAR),
                "same_rows_as_whole_read_filtered": same}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--buckets", type=int, default=4)
    ap.add_argument("--row-group-rows", type=int, default=16_384)
    ap.add_argument("--quick", action="store_true", help="a small table: the smoke run")
    args = ap.parse_args()
    if args.quick:
        args.rows, args.row_group_rows = 200_000, 4096
    print(json.dumps(run(args.rows, args.buckets, args.row_group_rows), indent=2))


if __name__ == "__main__":
    main()
