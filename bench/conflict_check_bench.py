"""The early-conflict check over many in-flight markers (RFC-56's measured scenario).

    python bench/conflict_check_bench.py [--reps 20]

20 older live writers, each with 75 in-flight markers spread over 20 MARKERS files (1,500 markers),
and our write with markers in 20 file groups: time the full asynchronous check the marker service
runs (`find_early_conflict(..., batched=True)`: timeline, heartbeats, every candidate's MARKERS files,
commits since we started). Floor: reading the same 1,500 markers with `list_markers` alone. Also the
direct strategy's per-file check (one partition listing per candidate). Hudi reports 179 ms for the
asynchronous check on a local file system.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lakecore import Table
from lakecore.concurrency import begin_write
from lakecore.concurrency.conflicts.early import find_early_conflict
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig, beat
from lakecore.layout import bucket_file_id, log_file_name
from lakecore.timeline import now_ms
from lakecore.write.markers import batch_file, list_markers

WRITERS, PER_WRITER, FILES = 20, 75, 20
HB = HeartbeatConfig(interval_s=60, tolerable_misses=3)


def median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
        t = Table.create(f"{d}/t", schema=schema, record_key="id", buckets=1024,
                         partition_fields=(), concurrency_mode="optimistic")
        writers = [begin_write(t.storage, t.config, t.lock, "upsert") for _ in range(WRITERS)]
        for k, w in enumerate(writers):
            T = w.instant.requested_time
            beat(t.storage, T, now_ms())
            names = [f"{log_file_name(bucket_file_id(k * PER_WRITER + j), T, '0-0-0')}.marker.append"
                     for j in range(PER_WRITER)]
            for f in range(FILES):
                t.storage.write(batch_file(T, f), "".join(n + "\n" for n in names[f::FILES]).encode())
        ours = begin_write(t.storage, t.config, t.lock, "upsert")
        groups = {("", bucket_file_id(5000 + j)) for j in range(20)}  # disjoint: the check must scan all
        def check() -> object:
            return find_early_conflict(t.storage, ours.instant, groups, HB, check_commits=True, batched=True)

        assert check() is None
        floor = median_ms(lambda: [list_markers(t.storage, w.instant.requested_time) for w in writers],
                          a.reps)
        full = median_ms(check, a.reps)
        one = median_ms(lambda: find_early_conflict(t.storage, ours.instant, {("", bucket_file_id(5001))}, HB,
                                                    check_commits=True), a.reps)
        hit = find_early_conflict(t.storage, ours.instant, {("", bucket_file_id(5))}, HB, check_commits=True,
                                  batched=True)
        assert hit is not None and hit.other == writers[0].instant.requested_time
    print(json.dumps({
        "markers": WRITERS * PER_WRITER, "writers": WRITERS, "markers_files_per_writer": FILES,
        "async_check_ms": round(full, 2), "read_markers_floor_ms": round(floor, 2),
        "ratio async_check / read_floor": round(full / floor, 2),
        "direct_check_one_file_group_ms": round(one, 2),
        "bar_ms": 20, "hudi_reported_ms": 179}, indent=2))


if __name__ == "__main__":
    main()
