"""Issue 27's bars at scale, in one run: the peers harness (`peer_harness.py`) at 1M, 4M and 16M rows
(an upsert of a tenth of them: half updates, half new keys), every run a fresh process, the peers
interleaved round after round:

    floor (pyarrow, one zstd file)   lakecore (zstd, 4 buckets)   lakecore-lz4   delta-rs   Lance

Per size, from the medians of the rounds:
- read after the upsert (`read2`): lakecore / floor (bar <= 1.3x) and lakecore / delta-rs (bar <= 1x),
  by wall time and by user CPU time of the read;
- bulk insert (`write`): lakecore and lakecore-lz4 / Lance (bar <= 1x), wall and CPU (user + system).

Wall is what the bars name. On a VM that backs memory lazily (this one: docs/benchmarks.md, issue 27) a
phase's system time depends on what the phases before it left resident, so CPU is reported beside it,
and each peer's table as read2 found it is read once more in a fresh process (`fresh_read_s`;
`fresh_process_wall` in the ratios): every peer from the same memory state, as a query reads a table.
A peer whose library is missing (`make bench` installs delta-rs and Lance) is reported as skipped.

    python bench/scale_bench.py [--sizes 1000000,4000000,16000000] [--rounds 2] [--jsonl FILE] [--quick]

Prints JSON; the raw records go to --jsonl (default bench/out/scale-<time>.jsonl; with --quick, 20k
rows and one round for the smoke test, a temporary file).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import PEERS as PEERS_DIR  # noqa: E402

PEERS = {"floor": ["--compression", "zstd"], "lakecore": [], "lakecore-lz4": [], "deltalake": [],
         "lance": []}   # each peer's own harness options
LABEL = {"floor": "floor-pyarrow-zstd"}   # the name the harness records the floor under
READ_VS_FLOOR, READ_VS_DELTA, WRITE_VS_LANCE = 1.3, 1.0, 1.0


def run_peer(name: str, rows: int, rnd: int, jsonl: str, data_dir: str) -> str | None:
    """One harness run in a fresh process, then its table read again in another (`fresh_read_s`); None
    when both ran, else why not (the tail of the error)."""
    kept = os.path.join(data_dir, f"kept-{name}")
    shutil.rmtree(kept, ignore_errors=True)
    harness = os.path.join(HERE, "peer_harness.py")
    runs = [[sys.executable, harness, name, jsonl, "--rows", str(rows), "--upsert", str(rows // 10),
             "--run", str(rnd), "--dir", data_dir, "--keep", kept, *PEERS[name]],
            [sys.executable, harness, "--fresh-read", name, kept, jsonl]]
    try:
        for args in runs:
            print(f"$ {' '.join(args[1:])}", file=sys.stderr, flush=True)
            done = subprocess.run(args, capture_output=True, text=True, check=False)
            if done.returncode:
                return (done.stderr.strip().splitlines() or ["failed"])[-1][-300:]
        return None
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def medians(records: list[dict[str, Any]]) -> dict[str, float]:
    keys = [k for k, v in records[0].items() if k.endswith(("_s", "_minflt")) and isinstance(v, (int, float))]
    return {k: round(statistics.median(r[k] for r in records), 4)
            for k in keys if all(k in r for r in records)}


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def summarize(records: list[dict[str, Any]], skipped: dict[str, str]) -> dict[str, Any]:
    by_peer: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_peer.setdefault(r["peer"], []).append(r)
    med = {peer: medians(rs) for peer, rs in by_peer.items()}
    verified = all(r["verify_rows_ok"] and r["verify_unique_keys"] and r["verify_i1_sum_ok"]
                   and r.get("verify_fresh_rows_ok", True) for r in records)

    def get(peer: str, key: str) -> float | None:
        return med.get(LABEL.get(peer, peer), {}).get(key)

    def cpu(peer: str, phase: str) -> float | None:
        user, system = get(peer, f"{phase}_user_s"), get(peer, f"{phase}_sys_s")
        return None if user is None or system is None else user + system

    def read2_against(other: str, bar: float) -> dict[str, Any]:
        return {"wall": ratio(get("lakecore", "read2_s"), get(other, "read2_s")),
                "user_cpu": ratio(get("lakecore", "read2_user_s"), get(other, "read2_user_s")), "bar": bar,
                "fresh_process_wall": ratio(get("lakecore", "fresh_read_s"), get(other, "fresh_read_s")),
                "fresh_process_user_cpu": ratio(get("lakecore", "fresh_read_user_s"),
                                                get(other, "fresh_read_user_s"))}

    out: dict[str, Any] = {
        "runs": {peer: len(rs) for peer, rs in by_peer.items()}, "skipped": skipped, "verified": verified,
        "other_procs_cpu_cores": max((r.get("other_procs_cpu_cores", 0) for r in records), default=0),
        "medians": {peer: {k: m[k] for k in ("write_s", "read1_s", "upsert_s", "read2_s", "write_user_s",
                                               "write_sys_s", "read2_user_s", "read2_sys_s", "fresh_read_s",
                                               "fresh_read_user_s", "fresh_read_sys_s") if k in m}
                    for peer, m in med.items()},
        "read2_vs_floor": read2_against("floor", READ_VS_FLOOR),
        "read2_vs_deltalake": read2_against("deltalake", READ_VS_DELTA),
        "write_vs_lance": {peer: {"wall": ratio(get(peer, "write_s"), get("lance", "write_s")),
                                  "cpu": ratio(cpu(peer, "write"), cpu("lance", "write"))}
                           for peer in ("lakecore", "lakecore-lz4")} | {"bar": WRITE_VS_LANCE},
    }
    walls = [out["read2_vs_floor"]["wall"], out["read2_vs_deltalake"]["wall"]]
    out["read2_meets_bars"] = None if None in walls else bool(
        walls[0] <= READ_VS_FLOOR and walls[1] <= READ_VS_DELTA)
    lance = [v["wall"] for k, v in out["write_vs_lance"].items() if k != "bar"]
    out["write_meets_bar"] = None if None in lance else bool(min(lance) <= WRITE_VS_LANCE)
    return out


def peers_table(jsonl: str) -> str:
    """The shared harness's own summary table (medians and ranges per peer) of one size's runs."""
    done = subprocess.run([sys.executable, os.path.join(PEERS_DIR, "summarize.py"), jsonl],
                          capture_output=True, text=True, check=False)
    return done.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000000,4000000,16000000")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--peers", default=",".join(PEERS), help=f"a subset of {','.join(PEERS)}")
    ap.add_argument("--jsonl", default=None)
    ap.add_argument("--dir", default=None, help="where the harness writes its tables (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="20k rows, one round: the smoke test")
    a = ap.parse_args()
    if a.quick:
        a.sizes, a.rounds = "20000", 1
    names = [p for p in a.peers.split(",") if p]
    unknown = set(names) - set(PEERS)
    if unknown:
        ap.error(f"unknown peers {sorted(unknown)}: choose from {','.join(PEERS)}")
    scratch = tempfile.mkdtemp(prefix="weir-scale-")
    out_dir = scratch if a.quick else os.path.join(HERE, "out")
    os.makedirs(out_dir, exist_ok=True)
    jsonl = a.jsonl or os.path.join(out_dir, f"scale-{time.strftime('%Y%m%dT%H%M%S')}.jsonl")
    data_dir = a.dir or scratch
    try:
        result = measure(a, names, jsonl, data_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(result, indent=2))


def measure(a: argparse.Namespace, names: list[str], jsonl: str, data_dir: str) -> dict[str, Any]:
    result: dict[str, Any] = {"jsonl": jsonl, "cpu_count": os.cpu_count(), "sizes": {}}
    for rows in (int(s) for s in a.sizes.split(",")):
        size_jsonl = f"{jsonl}.{rows}"
        skipped: dict[str, str] = {}
        for rnd in range(1, a.rounds + 1):
            for name in names:
                if name in skipped:
                    continue
                failed = run_peer(name, rows, rnd, size_jsonl, data_dir)
                if failed:
                    skipped[name] = failed
        records = []
        if os.path.exists(size_jsonl):
            with open(size_jsonl) as fh:
                records = [json.loads(line) for line in fh]
        summary = summarize(records, skipped) if records else {"skipped": skipped}
        if records:
            summary["peers_table"] = peers_table(size_jsonl)
            with open(jsonl, "a") as fh:
                fh.writelines(json.dumps(r) + "\n" for r in records)
            os.remove(size_jsonl)
        result["sizes"][rows] = summary
    return result


if __name__ == "__main__":
    main()
