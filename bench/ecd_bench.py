"""Early conflict detection (RFC-56's scenario): how much a doomed younger writer wastes, with and without.

    python bench/ecd_bench.py [--reps 3] [--base 400000] [--a-rows 20000] [--b-rows 400000]
                              [--rows-per-file 10000] [--a-delay 0] [--delays 0.1,0.25]

A 1-bucket unpartitioned merge-on-read table under optimistic concurrency, `--base` rows bulk-inserted.
Writer A (small: `--a-rows` updates) and writer B (large: `--b-rows` updates, 20x A) update the same
file group at the same time, each in its own process with a ZooKeeper table lock; both roll log files
over every `--rows-per-file` rows (B: 40 files of 10k rows), so an early abort can stop B partway.

Timing: both writers get the start signal together. B does not draw its instant before A has drawn
its own (B is the younger writer), and A waits, after drawing its instant, until B has drawn B's (so
the two writes really overlap; then A sleeps `--a-delay` s before writing, default 0); from there both
run at their natural speed: A writes 20k rows and commits while B is still writing 400k.

Variants (each `--reps` times on a fresh copy of the table, medians reported):
- direct:    EarlyDetection("direct")   -> B raises EarlyConflict; wasted = EarlyConflict.bytes_written
- direct_zk: EarlyDetection("direct_zk", zookeeper=connect), same
- none:      no early detection         -> B writes everything and fails at commit with WriteConflict;
             wasted = all of B's bytes (B's full write measured alone on another copy of the table)
Reported per variant: bytes wasted, fraction of B's full write, time from B's start until B failed.
Bar: with detection <= 5% of B's bytes wasted. Every run checks that A committed and B did not.
Sensitivity (`--delays`): "direct" again with A sleeping d seconds before writing; B keeps writing
files until A's first marker appears, so what B wastes grows with d (detection cannot be earlier).

Starts its own ZooKeeper (tests/support/zookeeper.py) in a temp dir and stops it at the end.
Prints one JSON document; a short summary goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from common import datagen, median  # noqa: E402

BAR_WASTED = 0.05
VARIANTS = ("direct", "direct_zk", "none")
SIGNAL_TIMEOUT_S = 60.0


class SignalLock:
    """Delegates to the table lock. Before the first acquire: wait for `before` (if any). After the
    first release (the end of begin_write's critical section, i.e. our instant is drawn): set `drawn`,
    then wait for `after` (if any)."""

    def __init__(self, inner: Any, drawn: Any, before: Any = None, after: Any = None) -> None:
        self.inner, self.drawn, self.before, self.after = inner, drawn, before, after
        self.spec = inner.spec  # the table lock it is (Table.open checks it against table.json)
        self.uses = 0

    def acquire(self, timeout: float | None = None) -> None:
        self.inner.acquire(timeout)

    def release(self) -> None:
        self.inner.release()

    def is_held(self) -> bool:
        return bool(self.inner.is_held())

    def __enter__(self) -> SignalLock:
        if self.uses == 0 and self.before is not None and not self.before.wait(SIGNAL_TIMEOUT_S):
            raise TimeoutError("the other writer never drew its instant")
        self.inner.acquire()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.inner.release()
        self.uses += 1
        if self.uses == 1:
            self.drawn.set()
            if self.after is not None and not self.after.wait(SIGNAL_TIMEOUT_S):
                raise TimeoutError("the other writer never drew its instant")


def schema() -> pa.Schema:
    return datagen().make_table(np.zeros(1, np.int64), np.zeros(1, np.int64), np.random.default_rng(0)).schema


def writer_data(role: str, base: int, a_rows: int, b_rows: int) -> pa.Table:
    """A updates a random subset of the base keys (ts 2); B updates `b_rows` base keys (ts 3)."""
    rng = np.random.default_rng({"A": 1, "B": 2}[role])
    keys = rng.choice(base, a_rows if role == "A" else b_rows, replace=False)
    ts = np.full(len(keys), 2 if role == "A" else 3, np.int64)
    return datagen().make_table(keys, ts, rng, role.lower())


def options(variant: str, connect: str, rows_per_file: int) -> Any:
    from lakecore import ConflictOptions, FileOptions, WriterOptions
    from lakecore.concurrency.conflicts.early import EarlyDetection

    detection = {"none": None, "direct": EarlyDetection("direct"),
                 "direct_zk": EarlyDetection("direct_zk", zookeeper=connect)}[variant]
    return WriterOptions(conflicts=ConflictOptions(early_detection=detection),
                         files=FileOptions(max_rows_per_file=rows_per_file))


def worker(role: str, connect: str, sizes: dict[str, int], jobs: Any, results: Any,
           events: dict[str, Any]) -> None:
    """A long-lived writer process (data generated once); runs one write per job."""
    from lakecore import Table
    from lakecore.concurrency.zookeeper import close_shared_clients
    from lakecore.errors import EarlyConflict, WriteConflict

    data = writer_data(role, sizes["base"], sizes["a_rows"], sizes["b_rows"])
    results.put({"role": role, "ready": True})
    try:
        while (job := jobs.get()) is not None:
            uri, variant, alone = job["uri"], job["variant"], job["alone"]
            lock = Table.open(uri).lock  # the ZooKeeper lock the table (copied from the template) records
            with lock:  # connect the session before the clock starts
                pass
            if alone:
                wrapped: Any = lock
            elif role == "A":
                wrapped = SignalLock(lock, events["a_drawn"], after=events["b_drawn"])
            else:
                wrapped = SignalLock(lock, events["b_drawn"], before=events["a_drawn"])
            table = Table.open(uri, lock=wrapped, options=options(variant, connect, sizes["rows_per_file"]))
            results.put({"role": role, "armed": True})
            if not alone:
                events["go"].wait()
            if role == "A" and job["a_delay"]:
                wrapped.after = _Delayed(events["b_drawn"], job["a_delay"])
            out: dict[str, Any] = {"role": role, "variant": variant}
            t0 = time.perf_counter()
            try:
                res = table.upsert(data)
                out.update(outcome="committed", instant=res.instant.requested_time,
                           bytes=sum(s.bytes for s in res.stats), files=len(res.stats))
            except EarlyConflict as exc:
                out.update(outcome="early_conflict", report=exc.report(), bytes=exc.bytes_written)
            except WriteConflict as exc:
                out.update(outcome="write_conflict", instant=exc.instant)
            out["seconds"] = time.perf_counter() - t0
            results.put(out)
    except BaseException as exc:
        results.put({"role": role, "error": f"{type(exc).__name__}: {exc}"})
        raise
    finally:
        close_shared_clients()


class _Delayed:
    """An event wait followed by a sleep (A pauses after both instants are drawn)."""

    def __init__(self, event: Any, delay: float) -> None:
        self.event, self.delay = event, delay

    def wait(self, timeout: float) -> bool:
        ok = bool(self.event.wait(timeout))
        time.sleep(self.delay)
        return ok


def get(results: Any, timeout: float = 300) -> dict[str, Any]:
    out: dict[str, Any] = results.get(timeout=timeout)
    if "error" in out:
        raise RuntimeError(f"writer {out['role']} failed: {out['error']}")
    return out


def check_after(uri: str, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """A committed and is visible; B left nothing: no pending instant, no data file of B's instant."""
    from lakecore import Table

    table = Table.open(uri)
    timeline = table.timeline()
    assert a["outcome"] == "committed", a
    assert not timeline.pending, [str(i) for i in timeline.pending]
    writes = [i for i in timeline.completed if i.action in ("deltacommit", "commit")]
    assert [i.requested_time for i in writes][-1] == a["instant"], "A is not the last write"
    rollbacks = [table.commit_metadata(i) for i in timeline.completed if i.action == "rollback"]
    assert len(rollbacks) == 1, f"{len(rollbacks)} rollbacks"
    rolled = rollbacks[0].extra
    b_instant = rolled["rolled_back"]
    leftovers = [f for f in table.storage.list_dir("") if b_instant in f.path.rsplit("/", 1)[-1]]
    assert not leftovers, leftovers
    return {"b_instant": b_instant, "b_files_rolled_back": len(rolled.get("deleted_files", []))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--base", type=int, default=400_000)
    ap.add_argument("--a-rows", type=int, default=20_000)
    ap.add_argument("--b-rows", type=int, default=400_000)
    ap.add_argument("--rows-per-file", type=int, default=10_000)
    ap.add_argument("--a-delay", type=float, default=0.0, help="A sleeps this long after both instants exist")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--delays", default="0.1,0.25",
                    help="also run 'direct' with A sleeping this long (s) before writing (sensitivity)")
    a = ap.parse_args()
    from lakecore import Table
    from lakecore.config import LockSpec
    from tests.support.zookeeper import ZooKeeperServer

    sizes = {"base": a.base, "a_rows": a.a_rows, "b_rows": a.b_rows, "rows_per_file": a.rows_per_file}
    variants = [v for v in a.variants.split(",") if v]
    started = time.perf_counter()
    load_start = [round(x, 2) for x in os.getloadavg()]
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    delays = [float(d) for d in a.delays.split(",") if d]
    delayed: dict[float, list[dict[str, Any]]] = {d: [] for d in delays}
    with tempfile.TemporaryDirectory(prefix="weir-ecd-bench-") as work:
        server = ZooKeeperServer(Path(work) / "zookeeper")
        server.start()
        ctx = mp.get_context("spawn")
        events = {name: ctx.Event() for name in ("go", "a_drawn", "b_drawn")}
        results = ctx.Queue()
        jobs = {"A": ctx.Queue(), "B": ctx.Queue()}
        procs = {role: ctx.Process(target=worker, args=(role, server.connect_string, sizes, jobs[role],
                                                        results, events)) for role in ("A", "B")}
        try:
            template = os.path.join(work, "template")
            base = datagen().make_table(np.arange(a.base), np.ones(a.base, np.int64),
                                        np.random.default_rng(0))
            Table.create(template, schema=base.schema, record_key="key", ordering_field="ts", buckets=1,
                         table_type="merge_on_read", concurrency_mode="optimistic",
                         lock=LockSpec("zookeeper", connect=server.connect_string)).bulk_insert(base)
            for p in procs.values():
                p.start()
            for _ in procs:
                assert get(results).get("ready")

            # B's full write, alone on a copy of the table (what variant "none" wastes)
            alone_uri = os.path.join(work, "alone")
            shutil.copytree(template, alone_uri)
            jobs["B"].put({"uri": alone_uri, "variant": "none", "alone": True, "a_delay": 0})
            assert get(results).get("armed")
            full = get(results)
            assert full["outcome"] == "committed", full
            shutil.rmtree(alone_uri)

            n = 0

            def run_pair(variant: str, a_delay: float) -> dict[str, Any]:
                nonlocal n
                n += 1
                uri = os.path.join(work, f"run-{n}-{variant}")
                shutil.copytree(template, uri)
                for e in events.values():
                    e.clear()
                for role in ("A", "B"):
                    jobs[role].put({"uri": uri, "variant": variant, "alone": False, "a_delay": a_delay})
                for _ in procs:
                    assert get(results).get("armed")
                events["go"].set()
                outs = {o["role"]: o for o in (get(results), get(results))}
                checked = check_after(uri, outs["A"], outs["B"])
                b = outs["B"]
                expected = "write_conflict" if variant == "none" else "early_conflict"
                assert b["outcome"] == expected, (variant, b)
                wasted = full["bytes"] if variant == "none" else b["bytes"]
                shutil.rmtree(uri)
                message = b.get("report", {}).get("message", "")
                caught = ("a_live_marker" if "is still writing" in message else
                          "a_completed_commit" if "completed at" in message else "commit_check")
                return {"b_outcome": b["outcome"], "caught_by": caught, "wasted_bytes": wasted,
                        "wasted_fraction": wasted / full["bytes"], "b_seconds_until_failed": b["seconds"],
                        "a_seconds": outs["A"]["seconds"], **checked}

            for _rep in range(a.reps):
                for variant in variants:
                    runs[variant].append(run_pair(variant, a.a_delay))
            for delay in delays:
                for _rep in range(a.reps):
                    delayed[delay].append(run_pair("direct", delay))
        finally:
            for q in jobs.values():
                q.put(None)
            for p in procs.values():
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
                    p.join()
            server.stop()

    summary: dict[str, Any] = {}
    for variant, rs in runs.items():
        if not rs:
            continue
        frac = median([r["wasted_fraction"] for r in rs])
        summary[variant] = {
            "wasted_bytes_median": round(median([r["wasted_bytes"] for r in rs])),
            "wasted_fraction_median": round(frac, 4),
            "b_seconds_until_failed_median": round(median([r["b_seconds_until_failed"] for r in rs]), 3),
            "a_seconds_median": round(median([r["a_seconds"] for r in rs]), 3),
            "b_files_rolled_back": [r["b_files_rolled_back"] for r in rs],
            "caught_by": [r["caught_by"] for r in rs],
            "runs": [{"wasted_bytes": r["wasted_bytes"], "wasted_fraction": round(r["wasted_fraction"], 4),
                      "b_seconds_until_failed": round(r["b_seconds_until_failed"], 3)} for r in rs],
        }
        if variant != "none":
            summary[variant]["meets_bar"] = frac <= BAR_WASTED
    out = {
        "b_full_write": {"bytes": full["bytes"], "files": full["files"],
                         "seconds": round(full["seconds"], 3)},
        "variants": summary,
        "ratios": {**{f"{v} wasted / none wasted": round(summary[v]["wasted_bytes_median"] /
                                                          summary["none"]["wasted_bytes_median"], 4)
                      for v in summary if v != "none" and "none" in summary},
                   **{f"{v} time to fail / none time to fail": round(
                       summary[v]["b_seconds_until_failed_median"]
                       / summary["none"]["b_seconds_until_failed_median"], 3)
                      for v in summary if v != "none" and "none" in summary}},
        "bar_wasted_fraction_with_detection": BAR_WASTED,
        "direct_when_a_sleeps_before_writing": {
            f"{d}s": {"wasted_fraction_median": round(median([r["wasted_fraction"] for r in rs]), 4),
                      "b_files_written_median": round(median([r["wasted_bytes"] for r in rs]) * full["files"]
                      / full["bytes"], 1),
                      "b_seconds_until_failed_median": round(
                          median([r["b_seconds_until_failed"] for r in rs]), 3),
                      "caught_by": [r["caught_by"] for r in rs]}
            for d, rs in delayed.items()},
        "reps": a.reps, **sizes, "a_delay_s": a.a_delay,
        "load_average_at_start": load_start, "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "total_seconds": round(time.perf_counter() - started, 1),
    }
    print(json.dumps(out, indent=2))
    for v, s in summary.items():
        print(f"{v}: B wasted {s['wasted_bytes_median']:,} bytes ({s['wasted_fraction_median']:.1%} of "
              f"{full['bytes']:,}), failed after {s['b_seconds_until_failed_median']} s", file=sys.stderr)


if __name__ == "__main__":
    main()
