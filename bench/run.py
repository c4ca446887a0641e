"""`make bench`: every benchmark, with ratios against floors measured in the same run.

1. format_bench  lakecore vs pyarrow writing/reading the same rows (the issue's bars)
2. stitch_bench  3-stream partial-update read vs pyarrow joining the streams' latest values
3. merge_bench   the merge engine alone
   (also: concurrency, early conflict detection, compaction, archival of a 100k-instant timeline,
   Spark jobs)
   operator_bench  the operator on a real API server: LakeWriter -> driver pod latency, 200 writers at once
   supervision_bench  conflict -> loser stopped latency, RFC-56 bytes lost, cost of 50 tables x 4 writers
   scan_bench    the streaming scan vs Table.read on a 16M-row merge-on-read table: peak RSS, throughput
   skipping_bench  bytes a 1% filter on a non-partition column of a clustered table reads vs a whole read
   small_slices_bench  a table of many small file groups: read vs slice by slice vs pyarrow over its files
   publish_bench  Iceberg publish of 1k/10k-file tables (incremental, full rebuild) vs fastavro writing
                 the same manifest entries; DuckDB/pyiceberg reading the published snapshot vs Table.read
4. peers         scale_bench: the shared peers harness with lakecore added (floor zstd, lakecore,
                 lakecore-lz4, delta-rs, Lance) at 1M, 4M and 16M rows, rounds interleaved (2 by
                 default), each run a fresh process, with issue 27's ratios; skipped with --no-peers

Results go to bench/out/ (JSON) and a summary is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")


def run(args: list[str]) -> str:
    print(f"$ {' '.join(args)}", file=sys.stderr, flush=True)
    return subprocess.run([sys.executable, *args], check=True, capture_output=True, text=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    results = {"format": json.loads(run([os.path.join(HERE, "format_bench.py")])),
               "stitch": json.loads(run([os.path.join(HERE, "stitch_bench.py")])),
               "concurrency": json.loads(run([os.path.join(HERE, "concurrency_bench.py")])),
               "ecd": json.loads(run([os.path.join(HERE, "ecd_bench.py")])),
               "compaction": json.loads(run([os.path.join(HERE, "compaction_bench.py")])),
               "archival": json.loads(run([os.path.join(HERE, "archival_bench.py")])),
               "spark": json.loads(run([os.path.join(HERE, "spark_bench.py")])),
               "operator": json.loads(run([os.path.join(HERE, "operator_bench.py")])),
               "supervision": json.loads(run([os.path.join(HERE, "supervision_bench.py")])),
               "scan": json.loads(run([os.path.join(HERE, "scan_bench.py")])),
               "skipping": json.loads(run([os.path.join(HERE, "skipping_bench.py")])),
               "small_slices": json.loads(run([os.path.join(HERE, "small_slices_bench.py")])),
               "publish": json.loads(run([os.path.join(HERE, "publish_bench.py")]))}
    print(run([os.path.join(HERE, "merge_bench.py")]))
    if not a.no_peers:
        scale = json.loads(run([os.path.join(HERE, "scale_bench.py"), "--rounds", str(a.rounds),
                                "--jsonl", os.path.join(OUT, f"peers-{stamp}.jsonl")]))
        for rows, size in scale["sizes"].items():
            print(f"peers at {int(rows):,} rows")
            print(size.pop("peers_table", ""))
        results["peers"] = scale
    with open(os.path.join(OUT, f"results-{stamp}.json"), "w") as fh:
        json.dump(results, fh, indent=2)
    print(json.dumps({k: v for k, v in results.items() if k != "peers_table"}, indent=2))


if __name__ == "__main__":
    main()
