"""The streaming scan vs `Table.read` over a large merge-on-read table with logs (issue 27).

    python bench/scan_bench.py [--rows N] [--partitions P] [--buckets B] [--reps R] [--dir D] [--quick]
                               [--scan-only]

Builds a table of rows shaped like the peers' (key, ts, three int64, three float64, two strings; made
here, so the smoke run needs no peers folder), written a partition at a time so that no more than one
partition's rows are ever in memory: each partition gets its base files from a bulk insert, then an
upsert of 10% of its rows (half updates with a larger `ts`, half new keys) leaves a log in every file
group. Then, in fresh child processes, alternately: a scan consuming `to_batches()` (counting rows,
holding nothing) and `Table.read()`. Each child reports its time and its peak RSS above its own baseline
(VmHWM minus VmRSS after imports, opening the table and planning): what the read itself holds. Prints one
JSON document; `--quick` is the smoke run (a small table); `--scan-only` skips `read` (a table larger
than this machine's memory: no throughput ratio then).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import median

from lakecore import Table

BARS = {"scan_peak_rss_above_baseline_mb": 1024.0, "scan_vs_read_throughput": 0.8}


def rows_of(keys: np.ndarray, ts: np.ndarray, rng: np.random.Generator, tag: str) -> pa.Table:
    """Rows shaped like the peers' (key, ts, three int64, three float64, two 8-character strings), made
    here: the scan compares with lakecore's own read, so it needs no peer's data (nor their folder)."""
    n = len(keys)

    def strings(prefix: str) -> pa.Array:
        return pa.array(np.char.add(prefix, np.char.zfill(rng.integers(0, 10_000_000, n).astype(str), 7)))

    return pa.table({"key": pa.array(keys, pa.int64()), "ts": pa.array(ts, pa.int64()),
                     "i1": rng.integers(0, 1_000_000, n), "i2": rng.integers(-1_000, 1_000, n),
                     "i3": rng.integers(0, 2**40, n), "f1": rng.random(n), "f2": rng.normal(0, 1, n),
                     "f3": rng.random(n) * 1000, "s1": strings(tag), "s2": strings("z")})


def build(uri: str, rows: int, partitions: int, buckets: int) -> None:
    per = rows // partitions
    table = None
    for p in range(partitions):
        rng = np.random.default_rng(p)
        keys = np.arange(p * per * 2, (p + 1) * per * 2, 2, dtype=np.int64)  # even keys; new ones are odd
        base = _in_partition(rows_of(keys, np.ones(per, np.int64), rng, "a"), p)
        if table is None:
            table = Table.create(uri, schema=base.schema, record_key="key", ordering_field="ts",
                                 partition_fields=["part"], buckets=buckets)
        table.bulk_insert(base)
        n = per // 10
        changed = np.concatenate([rng.choice(keys, n // 2, replace=False), keys[: n - n // 2] + 1])
        table.upsert(_in_partition(rows_of(changed, np.full(n, 2, np.int64), rng, "u"), p))


def _in_partition(rows: pa.Table, p: int) -> pa.Table:
    return rows.append_column("part", pa.array(np.full(rows.num_rows, p, np.int64)))


def rss_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(mode: str, uri: str) -> None:
    """One measurement in this (fresh) process: the scan's or the read's time and RSS above baseline."""
    table = Table.open(uri)
    scan = table.scan()
    baseline = rss_kb("VmRSS")
    start = time.perf_counter()
    rows = nbytes = 0
    if mode == "scan":
        for batch in scan.to_batches():
            rows += batch.num_rows
            nbytes += batch.nbytes
    else:
        result = table.read()
        rows, nbytes = result.num_rows, result.nbytes
    seconds = time.perf_counter() - start
    peak = rss_kb("VmHWM")
    print(json.dumps({"mode": mode, "rows": rows, "arrow_mb": nbytes / 2**20, "s": seconds,
                      "peak_above_baseline_mb": (peak - baseline) / 1024, "baseline_mb": baseline / 1024,
                      "slices": len(scan.slices), "in_flight": scan.in_flight}))


def measure(mode: str, uri: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, uri],
                          capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--buckets", type=int, default=8)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--dir", default=None, help="keep the table here (built once, reused)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 200k rows")
    ap.add_argument("--scan-only", action="store_true", help="skip read() (a table beyond memory)")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "URI"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    if a.quick:
        a.rows, a.partitions, a.buckets, a.reps = 200_000, 2, 4, 1
    work = a.dir or tempfile.mkdtemp(prefix="scan_bench_")
    uri = os.path.join(work, f"t{a.rows}-{a.partitions}x{a.buckets}")
    load = [round(x, 1) for x in os.getloadavg()]
    try:
        build_s = 0.0
        if not os.path.exists(os.path.join(uri, "built")):
            shutil.rmtree(uri, ignore_errors=True)
            start = time.perf_counter()
            build(uri, a.rows, a.partitions, a.buckets)
            build_s = time.perf_counter() - start
            open(os.path.join(uri, "built"), "w").close()
        modes = ("scan",) if a.scan_only else ("scan", "read")
        runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
        for rep in range(a.reps):  # alternating, so drifting load affects both alike
            for mode in (modes if rep % 2 == 0 else modes[::-1]):
                runs[mode].append(measure(mode, uri))
        scan_s = median([r["s"] for r in runs["scan"]])
        read_s = median([r["s"] for r in runs["read"]]) if "read" in runs else None
        scan_rss = median([r["peak_above_baseline_mb"] for r in runs["scan"]])
        read_rss = median([r["peak_above_baseline_mb"] for r in runs["read"]]) if "read" in runs else None
        out = {
            "rows": runs["scan"][0]["rows"], "partitions": a.partitions, "buckets": a.buckets,
            "slices": runs["scan"][0]["slices"], "in_flight": runs["scan"][0]["in_flight"],
            "table_arrow_mb": round(runs["scan"][0]["arrow_mb"], 1), "build_s": round(build_s, 1),
            "scan_s": round(scan_s, 3), "read_s": None if read_s is None else round(read_s, 3),
            "scan_vs_read_throughput": None if read_s is None else round(read_s / scan_s, 3),
            "scan_peak_rss_above_baseline_mb": round(scan_rss, 1),
            "read_peak_rss_above_baseline_mb": None if read_rss is None else round(read_rss, 1),
            "load_avg_at_start": load, "load_avg_at_end": [round(x, 1) for x in os.getloadavg()],
            "bars": BARS, "runs": runs,
        }
        assert all(r["rows"] == out["rows"] for rs in runs.values() for r in rs), "scan and read disagree"
        print(json.dumps(out, indent=1))
        print(f"scan: {out['scan_peak_rss_above_baseline_mb']} MB above baseline (read: "
              f"{out['read_peak_rss_above_baseline_mb']} MB; table {out['table_arrow_mb']} MB in Arrow), "
              f"throughput {out['scan_vs_read_throughput']}x read's", file=sys.stderr)
    finally:
        if a.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
