"""lakecore vs a pyarrow floor on the peers' data: bulk insert, MOR upsert, snapshot read, peak RSS,
and the cost of durability (the same writes with fsync off, in the same run). The snapshot read is
measured twice: after `bulk_insert` (base files + one log per file group) and on a log-only table
(`insert` into a new merge-on-read table, then the upsert, no compaction: every file group holds
log files only).

    python bench/format_bench.py [--reps N] [--rows N] [--upsert N]

Each repetition runs the floor and lakecore back to back in this process (same data, same codec,
warm page cache for both), so the ratios compare like with like. Peak RSS of lakecore's
write + upsert + read is measured in a fresh child process (`--rss-child`), as the child's own
high-water mark (VmHWM): its `ru_maxrss` would report the parent's peak, which Linux carries over
into a process started by fork/vfork + exec.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import datagen, median, timed

from lakecore import Table

CODEC = "zstd"
BUCKETS = 4


def lakecore_table(path: str, schema: pa.Schema, *, fsync: bool = True) -> Table:
    return Table.create(path, schema=schema, record_key="key", ordering_field="ts", buckets=BUCKETS,
                        compression=CODEC, storage_options={"fsync": fsync})


def verify(result: pa.Table, base: pa.Table, ups: pa.Table) -> None:
    keep = pc.invert(pc.is_in(base["key"], ups["key"]))
    expected = pa.concat_tables([base.filter(keep), ups])
    assert result.num_rows == expected.num_rows, (result.num_rows, expected.num_rows)
    assert pc.sum(result["i1"]).as_py() == pc.sum(expected["i1"]).as_py()
    assert pc.count_distinct(result["key"]).as_py() == result.num_rows


def read_time(fn: Callable[[], pa.Table], n: int = 3) -> tuple[float, pa.Table]:
    """Median of `n` runs of a read (reads are short, so one run is at the mercy of a busy machine)."""
    runs = [timed(fn) for _ in range(n)]
    return median([t for t, _ in runs]), runs[-1][1]


def one_rep(work: str, base: pa.Table, ups: pa.Table) -> dict[str, float]:
    floor_file = os.path.join(work, "floor.parquet")
    r: dict[str, float] = {}
    r["floor_write"], _ = timed(lambda: pq.write_table(base, floor_file, compression=CODEC))
    r["floor_read"], _ = read_time(lambda: pq.read_table(floor_file))
    path = os.path.join(work, "lake")
    table = lakecore_table(path, base.schema)
    r["bulk_insert"], _ = timed(lambda: table.bulk_insert(base))
    r["read_base"], _ = read_time(lambda: table.read())
    r["upsert"], _ = timed(lambda: table.upsert(ups))
    r["read_after_upsert"], result = read_time(lambda: table.read())
    verify(result, base, ups)
    logs = lakecore_table(os.path.join(work, "lake-logs"), base.schema)
    logs.insert(base)
    logs.upsert(ups)
    r["read_log_only"], result = read_time(lambda: logs.read())
    verify(result, base, ups)
    # the durability cost: the same writes without fsync (what WEIR_FSYNC=off gives tmpfs users)
    nosync = lakecore_table(os.path.join(work, "lake-nosync"), base.schema, fsync=False)
    r["bulk_insert_nosync"], _ = timed(lambda: nosync.bulk_insert(base))
    r["upsert_nosync"], _ = timed(lambda: nosync.upsert(ups))
    shutil.rmtree(work)
    os.makedirs(work)
    return r


def peak_rss_kb() -> int:
    """This process's peak resident set (VmHWM; ru_maxrss where /proc is absent)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def rss_child(rows: int, upsert: int) -> None:
    base, ups = datagen().base_and_upsert(rows, upsert)
    before = peak_rss_kb()
    with tempfile.TemporaryDirectory() as d:
        t = lakecore_table(os.path.join(d, "lake"), base.schema)
        t.bulk_insert(base)
        t.upsert(ups)
        t.read()
    peak = peak_rss_kb()
    print(json.dumps({"peak_rss_mb": peak / 1024, "rss_after_datagen_mb": before / 1024}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--upsert", type=int, default=100_000)
    ap.add_argument("--rss-child", action="store_true")
    a = ap.parse_args()
    if a.rss_child:
        rss_child(a.rows, a.upsert)
        return
    base, ups = datagen().base_and_upsert(a.rows, a.upsert)
    reps = []
    with tempfile.TemporaryDirectory() as work:
        for _ in range(a.reps):
            reps.append(one_rep(work, base, ups))
    med = {k: median([r[k] for r in reps]) for k in reps[0]}
    child = subprocess.run([sys.executable, __file__, "--rss-child", "--rows", str(a.rows), "--upsert",
                            str(a.upsert)], capture_output=True, text=True, check=True)
    rss = json.loads(child.stdout.strip().splitlines()[-1])
    result = {
        "seconds": {k: round(v, 4) for k, v in med.items()},
        "ratios": {
            "bulk_insert / floor_write": round(med["bulk_insert"] / med["floor_write"], 3),
            "upsert / floor_write": round(med["upsert"] / med["floor_write"], 3),
            "read_after_upsert / floor_read": round(med["read_after_upsert"] / med["floor_read"], 3),
            "read_base / floor_read": round(med["read_base"] / med["floor_read"], 3),
            "read_log_only / floor_read": round(med["read_log_only"] / med["floor_read"], 3),
            "bulk_insert / bulk_insert_nosync": round(med["bulk_insert"] / med["bulk_insert_nosync"], 3),
            "upsert / upsert_nosync": round(med["upsert"] / med["upsert_nosync"], 3),
        },
        "throughput_rows_per_s": {
            "bulk_insert": round(a.rows / med["bulk_insert"]),
            "bulk_insert_nosync": round(a.rows / med["bulk_insert_nosync"]),
            "upsert": round(a.upsert / med["upsert"]),
            "upsert_nosync": round(a.upsert / med["upsert_nosync"]),
        },
        "bars": {"bulk_insert / floor_write": 1.5, "upsert / floor_write": 0.4,
                 "read_after_upsert / floor_read": 2.5, "peak_rss_mb": 1200},
        "targets_issue_13": {"bulk_insert / floor_write": 1.0, "read_log_only / floor_read": 1.6,
                             "peak_rss_mb": 900},
        "peak_rss_mb": round(rss["peak_rss_mb"], 1),
        "rss_after_datagen_mb": round(rss["rss_after_datagen_mb"], 1),
        "reps": a.reps, "rows": a.rows, "upsert_rows": a.upsert, "codec": CODEC, "buckets": BUCKETS,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
