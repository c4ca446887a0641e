"""Batched markers through the marker service vs direct marker files (the floor), same run, same disk.

    python bench/marker_service_bench.py [--uri DIR_OR_URI] [--threads 8] [--per-thread 250] [--reps 5]

1. create: markers/s for `--threads` client threads, each creating its markers one after another
   (a task blocks on each marker), through a MarkerService at the default 50 ms batch interval and
   at 5 ms; floor = the same threads creating direct marker files.
2. read: RFC-56's conflict-check scenario, 20 writers x 75 in-flight markers = 1,500 markers, each
   writer's spread over MARKERS0..MARKERS19; time to read them all with `list_markers` (median of
   `--reps`); floor = the same 1,500 markers as direct marker files. Hudi's published figure for this
   scenario (async checker, local fs) is 179 ms.

Prints a JSON object (ratios are service / floor) and a short summary on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lakecore.storage import Storage, open_storage
from lakecore.write.marker_service import MarkerClient, MarkerService
from lakecore.write.markers import MARKERS_DIR, Marker, create_marker, list_markers

WRITERS, MARKERS_PER_WRITER, FILES = 20, 75, 20


def fresh(root: str) -> Storage:
    return open_storage(f"{root.rstrip('/')}/{uuid.uuid4().hex}")


def instant(k: int) -> str:
    return f"2026112210150{k:04d}"


def in_threads(n: int, target) -> float:
    threads = [threading.Thread(target=target, args=(k,)) for k in range(n)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - started


def data_path(k: int, j: int) -> str:
    return f"dt=2026-11-{k % 28 + 1:02d}/{uuid.uuid4()}-{j}_{k}-{j}-0_{instant(0)}.parquet"


def create_direct(root: str, threads: int, per_thread: int) -> float:
    storage = fresh(root)
    seconds = in_threads(threads, lambda k: [
        create_marker(storage, Marker(instant(0), data_path(k, j), "create")) for j in range(per_thread)])
    return threads * per_thread / seconds


def create_service(root: str, threads: int, per_thread: int, interval: float) -> float:
    storage = fresh(root)
    with MarkerService(storage, batch_interval_s=interval) as svc:
        client = MarkerClient(svc.url)
        seconds = in_threads(threads, lambda k: [client.create(instant(0), data_path(k, j), "create")
                                                 for j in range(per_thread)])
    assert len(list_markers(storage, instant(0))) == threads * per_thread
    return threads * per_thread / seconds


def batched_writers(root: str) -> Storage:
    """20 in-flight writers, 75 markers each, each writer's spread over all 20 MARKERS files."""
    storage = fresh(root)
    with MarkerService(storage, batch_interval_s=0.002, num_files=FILES) as svc:
        client = MarkerClient(svc.url)
        # one marker per writer per flush, so round-robin visits every file index
        in_threads(WRITERS, lambda k: [client.create(instant(k), data_path(k, j), "create")
                                       for j in range(MARKERS_PER_WRITER)])
    for k in range(WRITERS):
        files = [f for f in storage.list_dir(f"{MARKERS_DIR}/{instant(k)}") if "MARKERS" in f.path]
        assert len(files) == FILES + 1, f"writer {k}: {len(files)} files"  # + MARKERS.type
    return storage


def direct_writers(root: str) -> Storage:
    storage = fresh(root)
    for k in range(WRITERS):
        for j in range(MARKERS_PER_WRITER):
            create_marker(storage, Marker(instant(k), data_path(k, j), "create"))
    return storage


def read_all(storage: Storage, reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        n = sum(len(list_markers(storage, instant(k))) for k in range(WRITERS))
        times.append(time.perf_counter() - started)
        assert n == WRITERS * MARKERS_PER_WRITER, n
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uri", default="", help="where the test tables go (default: a temp dir)")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--per-thread", type=int, default=250)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = a.uri or tmp
        floor_create = create_direct(root, a.threads, a.per_thread)
        default = create_service(root, a.threads, a.per_thread, 0.05)
        fast = create_service(root, a.threads, a.per_thread, 0.005)
        floor_read = read_all(direct_writers(root), a.reps)
        batched_read = read_all(batched_writers(root), a.reps)
    out = {
        "threads": a.threads, "markers": a.threads * a.per_thread,
        "create_markers_per_s": {"direct_floor": round(floor_create), "service_50ms": round(default),
                                 "service_5ms": round(fast)},
        "create_ratio_vs_floor": {"service_50ms": round(default / floor_create, 3),
                                  "service_5ms": round(fast / floor_create, 3)},
        "read_1500_markers_ms": {"direct_floor": round(floor_read * 1000, 1),
                                 "batched_20x20_files": round(batched_read * 1000, 1)},
        "read_ratio_vs_floor": round(batched_read / floor_read, 3),
    }
    print(json.dumps(out, indent=2))
    print(f"create, {a.threads} threads: direct {floor_create:.0f}/s, service@50ms {default:.0f}/s "
          f"({default / floor_create:.2f}x), service@5ms {fast:.0f}/s ({fast / floor_create:.2f}x)\n"
          f"read 1,500 markers of 20 writers: batched in 20 MARKERS files each {batched_read * 1000:.1f} ms, "
          f"direct files {floor_read * 1000:.1f} ms ({batched_read / floor_read:.2f}x); Hudi RFC-56: 179 ms",
          file=sys.stderr)


if __name__ == "__main__":
    main()
