"""The operator's reconcile latency and scale on a real API server (issues 10, 25), with an API floor.

    python bench/operator_bench.py [--quick] [--writers-latency 60] [--tables 20] [--writers 200]
                                   [--workers 8] [--verbose]

The real operator (`python -m lakeoperator`, tests/support/operator.py) runs as a process against a
real control plane of its own (etcd, kube-apiserver, kube-controller-manager from tests/support/
kube_server.py; `make controlplane` builds it) with the Weir CRDs, each part in a fresh namespace (the
operator watches only it). No kubelet: driver pods are never run, every figure ends when the pod EXISTS
(the operator's part; the kubelet's is not measured). The bench sees objects through watches, the way a
controller does, never by polling; its clients are the admin's, the operator's too.

1. latency: one LakeTable, Ready; then LakeWriters created one at a time, each timed from the create
   request to its driver pod's ADDED event on a pod watch (p50/p90/max). Floor: the same client
   creating a pod directly and seeing it on the same watch (one API round trip + watch delivery).
   Bar: p50 <= 0.3 s.
2. scale, live: a fresh namespace and operator; `--tables` LakeTables and `--writers` LakeWriters
   (spread evenly over the tables) created at once from 4 client threads; seconds from the first
   create until every table is Ready and every writer has its driver pod and phase Submitted (or
   later). Floor: the same threads creating as many pods directly until all are seen.
   Bar: 200 writers over 20 tables <= 30 s.
3. scale, cold start: the same objects created while no operator runs, then the operator starts;
   seconds from its start until the same state (what an operator restart or upgrade costs).
   Operator RSS (the process and any children), sampled every 0.1 s in 2. and 3.: peak and at
   the end. Bar: <= 200 MB.

`--quick` (a smoke run, < 60 s): 5 latency samples, 2 tables x 20 writers, no cold start.
Prints one JSON document on stdout (the bars and pass/fail per figure; in --quick the scale bar is
for 200 writers and not judged) and a table on stderr.
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
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import psutil

from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.kube_client import KubeClient, resource_path
from tests.support.kube_server import ControlPlane, controlplane_missing_reason
from tests.support.operator import CRDS, OperatorProcess, weir_path

LATENCY_P50_BAR_S = 0.3
SCALE_BAR_S = 30.0
SCALE_BAR_WRITERS, SCALE_BAR_TABLES = 200, 20
RSS_BAR_MB = 200.0
STARTED = ("Submitted", "Running", "Succeeded")   # a writer whose driver pod was created


class BenchOperator(OperatorProcess):
    """The test-support operator process, without --verbose unless asked (debug logs cost time)."""

    def __init__(self, *args: Any, verbose: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verbose = verbose

    def command(self) -> list[str]:
        args = super().command()
        return args if self.verbose else [a for a in args if a != "--verbose"]

    def rss_mb(self) -> float:
        assert self.process is not None
        try:
            proc = psutil.Process(self.process.pid)
            procs = [proc, *proc.children(recursive=True)]
            return sum(p.memory_info().rss for p in procs) / 2**20
        except psutil.NoSuchProcess:
            return 0.0


class Watch:
    """A watch on one collection in a thread: calls `seen(event_type, object, monotonic_time)` per event."""

    def __init__(self, client: KubeClient, path: str,
                 seen: Callable[[str, dict[str, Any], float], None]) -> None:
        self.client, self.path, self.seen = client, path, seen
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"watch {path}")
        self.thread.start()
        if not self.ready.wait(10):
            raise RuntimeError(f"the watch on {path} did not start; is the API server up?")

    def _run(self) -> None:
        version = self.client.get(self.path)["metadata"]["resourceVersion"]
        self.ready.set()
        for event in self.client.watch(self.path, timeout=3600, resourceVersion=version):
            self.seen(event["type"], event["object"], time.perf_counter())


class Sampler:
    """The operator's RSS every `interval` seconds in a thread."""

    def __init__(self, operator: BenchOperator, interval: float = 0.1) -> None:
        self.operator, self.interval = operator, interval
        self.peak = 0.0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="rss")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.operator.rss_mb())
            self._stop.wait(self.interval)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join()
        self.peak = max(self.peak, self.operator.rss_mb())


@dataclass
class Part:
    """One part of the bench: its own namespace on the bench's server, an operator watching only it."""

    client: KubeClient
    namespace: str
    operator: BenchOperator

    @property
    def pods(self) -> str:
        return resource_path("v1", "pods", self.namespace)

    def path(self, kind: str, name: str | None = None) -> str:
        return weir_path(kind, name, self.namespace)


@contextmanager
def part(server: ControlPlane, work: Path, *, operator: bool = True, workers: int = 8,
         verbose: bool = False) -> Iterator[Part]:
    """A fresh namespace (kept: deleting hundreds of objects would load the server during the next
    part; the server goes at the end) and the operator for it (started unless `operator` is False)."""
    work.mkdir(parents=True, exist_ok=True)
    namespace = server.create_namespace(work.name)
    op = BenchOperator(server, work, namespaces=(namespace,), workers=workers, verbose=verbose)
    if operator:
        op.start()
    try:
        yield Part(server.client(), namespace, op)
    finally:
        op.stop()


def floor_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"bench": "floor"}},
            "spec": {"containers": [{"name": "c", "image": "weir-test:local"}]}}


def pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(xs), 4), "p90": round(pct(xs, 0.9), 4), "max": round(max(xs), 4),
            "n": len(xs)}


# -- 1. latency --------------------------------------------------------------------------------------


def latency(server: ControlPlane, work: Path, n: int, workers: int, verbose: bool,
            timeout: float = 30) -> dict[str, Any]:
    with part(server, work, workers=workers, verbose=verbose) as bench:
        op, client = bench.operator, bench.client
        idle = op.rss_mb()
        pods: dict[str, float] = {}
        arrived = threading.Condition()

        def on_pod(kind: str, pod: dict[str, Any], at: float) -> None:
            labels = pod["metadata"].get("labels") or {}
            name = labels.get("weir.dev/writer") or pod["metadata"]["name"]
            with arrived:
                pods.setdefault(name, at)
                arrived.notify_all()

        Watch(client, bench.pods, on_pod)

        def until_seen(name: str) -> float:
            with arrived:
                if not arrived.wait_for(lambda: name in pods, timeout):
                    raise RuntimeError(f"no pod for {name} within {timeout}s; see the operator log:\n"
                                       f"{op.log()[-3000:]}")
                return pods[name]

        floor: list[float] = []
        for i in range(n):
            name = f"floor-{i}"
            started = time.perf_counter()
            client.create(bench.pods, floor_pod(name))
            floor.append(until_seen(name) - started)
        client.create(bench.path("LakeTable"), table(work, "lat"))
        client.wait_for(bench.path("LakeTable", "lat"),
                        lambda o: (o.get("status") or {}).get("phase") == "Ready", timeout=timeout)
        took: list[float] = []
        for i in range(n):
            name = f"lat-{i}"
            started = time.perf_counter()
            client.create(bench.path("LakeWriter"), batch_writer(work, name, "lat"))
            took.append(until_seen(name) - started)
        rss = op.rss_mb()
    return {"writer_create_to_pod_s": summary(took), "floor_pod_create_to_seen_s": summary(floor),
            "ratio_p50_vs_floor": round(statistics.median(took) / statistics.median(floor), 1),
            "operator_rss_idle_mb": round(idle, 1), "operator_rss_mb": round(rss, 1),
            "bar_p50_s": LATENCY_P50_BAR_S, "pass": statistics.median(took) <= LATENCY_P50_BAR_S}


# -- 2./3. scale ---------------------------------------------------------------------------------------


class Progress:
    """When each table became Ready and each writer had its pod and a started phase (from watches)."""

    def __init__(self, bench: Part, tables: int, writers: int) -> None:
        self.want_tables, self.want_writers = tables, writers
        self.ready: dict[str, float] = {}
        self.pod: dict[str, float] = {}
        self.phase: dict[str, float] = {}
        self.done = threading.Condition()
        Watch(bench.client, bench.path("LakeTable"), self._table)
        Watch(bench.client, bench.path("LakeWriter"), self._writer)
        Watch(bench.client, bench.pods, self._pod)

    def _table(self, _: str, obj: dict[str, Any], at: float) -> None:
        if (obj.get("status") or {}).get("phase") == "Ready":
            with self.done:
                self.ready.setdefault(obj["metadata"]["name"], at)
                self.done.notify_all()

    def _writer(self, _: str, obj: dict[str, Any], at: float) -> None:
        if (obj.get("status") or {}).get("phase") in STARTED:
            with self.done:
                self.phase.setdefault(obj["metadata"]["name"], at)
                self.done.notify_all()

    def _pod(self, _: str, obj: dict[str, Any], at: float) -> None:
        writer = (obj["metadata"].get("labels") or {}).get("weir.dev/writer")
        if writer:
            with self.done:
                self.pod.setdefault(writer, at)
                self.done.notify_all()

    def complete(self) -> bool:
        return len(self.ready) >= self.want_tables and len(self.pod) >= self.want_writers \
            and len(self.phase) >= self.want_writers

    def wait(self, timeout: float) -> bool:
        with self.done:
            return self.done.wait_for(self.complete, timeout)

    def times(self, start: float) -> dict[str, float]:
        writers = [max(self.pod[w], self.phase[w]) for w in self.pod if w in self.phase]
        return {"all_tables_ready_s": round(max(self.ready.values()) - start, 3),
                "all_writers_pod_and_submitted_s": round(max(writers) - start, 3),
                "half_the_writers_s": round(sorted(writers)[len(writers) // 2] - start, 3)}


def create_all(bench: Part, bodies: list[tuple[str, dict[str, Any]]], threads: int = 4) -> None:
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda kb: bench.client.create(bench.path(kb[0]), kb[1]), bodies))


def scale_bodies(work: Path, tables: int, writers: int) -> list[tuple[str, dict[str, Any]]]:
    bodies: list[tuple[str, dict[str, Any]]] = [("LakeTable", table(work, f"t{t}")) for t in range(tables)]
    bodies += [("LakeWriter", batch_writer(work, f"w{w}", f"t{w % tables}")) for w in range(writers)]
    return bodies


def scale(server: ControlPlane, work: Path, tables: int, writers: int, workers: int, verbose: bool, *,
          cold: bool, timeout: float = 300) -> dict[str, Any]:
    with part(server, work, operator=not cold, workers=workers, verbose=verbose) as bench:
        op = bench.operator
        progress = Progress(bench, tables, writers)
        bodies = scale_bodies(work, tables, writers)
        if cold:
            create_all(bench, bodies)
            start = time.perf_counter()
            op.start()
            live_at = time.perf_counter() - start
        else:
            start = time.perf_counter()
        with Sampler(op) as rss:
            if not cold:
                create_all(bench, bodies)
                created_in = time.perf_counter() - start
            if not progress.wait(timeout):
                raise RuntimeError(f"after {timeout}s: {len(progress.ready)}/{tables} tables Ready, "
                                   f"{len(progress.pod)}/{writers} pods, {len(progress.phase)}/{writers} "
                                   f"writers Submitted; operator log:\n{op.log()[-3000:]}")
            got = progress.times(start)
        end_rss = op.rss_mb()
    out: dict[str, Any] = {"tables": tables, "writers": writers, **got}
    out["operator_started_s" if cold else "objects_created_s"] = round(live_at if cold else created_in, 3)
    out.update({"operator_rss_peak_mb": round(rss.peak, 1), "operator_rss_end_mb": round(end_rss, 1)})
    return out


def scale_floor(server: ControlPlane, work: Path, writers: int) -> float:
    """The API alone: `writers` pods created from the same 4 threads, until the watch saw all."""
    with part(server, work, operator=False) as bench:
        client = bench.client
        seen: set[str] = set()
        done = threading.Condition()

        def on_pod(_: str, pod: dict[str, Any], at: float) -> None:
            with done:
                seen.add(pod["metadata"]["name"])
                done.notify_all()

        Watch(client, bench.pods, on_pod)
        start = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: client.create(bench.pods, floor_pod(f"floor-{i}")), range(writers)))
        with done:
            done.wait_for(lambda: len(seen) >= writers, 60)
        return round(time.perf_counter() - start, 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smoke run (< 60 s): small sizes, no cold start")
    ap.add_argument("--writers-latency", type=int, default=60)
    ap.add_argument("--tables", type=int, default=SCALE_BAR_TABLES)
    ap.add_argument("--writers", type=int, default=SCALE_BAR_WRITERS)
    ap.add_argument("--workers", type=int, default=8, help="the operator's --workers")
    ap.add_argument("--verbose", action="store_true", help="run the operator with --verbose (debug logs)")
    ap.add_argument("--keep", default="", help="keep the work dirs (operator logs) under this directory")
    a = ap.parse_args()
    if a.quick:
        a.writers_latency, a.tables, a.writers = 5, 2, 20
    judged = a.tables >= SCALE_BAR_TABLES and a.writers >= SCALE_BAR_WRITERS
    missing = controlplane_missing_reason()
    if missing is not None:
        sys.exit(f"operator_bench: the real API server is not available: {missing}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(a.keep or tmp)
        controlplane = root / "controlplane"
        controlplane.mkdir(parents=True, exist_ok=True)
        with ControlPlane(controlplane) as server:
            server.apply_crds(*CRDS)
            version = server.client().get("/version")["gitVersion"]
            lat = latency(server, root / "latency", a.writers_latency, a.workers, a.verbose)
            live = scale(server, root / "scale-live", a.tables, a.writers, a.workers, a.verbose, cold=False)
            cold = None if a.quick else scale(server, root / "scale-cold", a.tables, a.writers, a.workers,
                                              a.verbose, cold=True)
            floor = scale_floor(server, root / "scale-floor", a.writers)
    live["floor_pods_created_and_seen_s"] = floor
    live["ratio_vs_floor"] = round(live["all_writers_pod_and_submitted_s"] / floor, 1)
    scales = [live] + ([cold] if cold else [])
    worst = max(s["all_writers_pod_and_submitted_s"] for s in scales)
    peak = max([s["operator_rss_peak_mb"] for s in scales] + [lat["operator_rss_mb"]])
    for s in scales:
        s.update({"bar_s": SCALE_BAR_S, "judged": judged,
                  "pass": s["all_writers_pod_and_submitted_s"] <= SCALE_BAR_S if judged else None})
    out = {"quick": a.quick, "workers": a.workers, "cpus": os.cpu_count(), "api_server": version,
           "latency": lat,
           "scale_live": live, "scale_cold_start": cold,
           "rss": {"peak_mb": peak, "bar_mb": RSS_BAR_MB, "pass": peak <= RSS_BAR_MB},
           "pass": bool(lat["pass"] and (worst <= SCALE_BAR_S or not judged) and peak <= RSS_BAR_MB)}
    print(json.dumps(out, indent=2))
    w = lat["writer_create_to_pod_s"]
    f = lat["floor_pod_create_to_seen_s"]
    rows = [("latency: LakeWriter create -> driver pod (p50 / p90 / max)",
             f"{w['p50']:.3f} / {w['p90']:.3f} / {w['max']:.3f} s",
             f"{f['p50']:.4f} s (x{lat['ratio_p50_vs_floor']})",
             f"p50 <= {LATENCY_P50_BAR_S} s", lat["pass"]),
            ("operator RSS: live, no objects / after the latency writers",
             f"{lat['operator_rss_idle_mb']:.0f} / {lat['operator_rss_mb']:.0f} MB", "", "", None)]
    for label, s in (("live", live), ("cold start", cold or {})):
        if not s:
            continue
        rows.append((f"scale {label}: {s['tables']} tables Ready", f"{s['all_tables_ready_s']:.2f} s", "", "",
                     None))
        rows.append((f"scale {label}: {s['writers']} writers pod + Submitted",
                     f"{s['all_writers_pod_and_submitted_s']:.2f} s (half: {s['half_the_writers_s']:.2f})",
                     f"{floor:.2f} s (x{live['ratio_vs_floor']})" if s is live else "",
                     f"<= {SCALE_BAR_S:.0f} s" + ("" if judged else " (at 200; not judged)"), s["pass"]))
        rows.append((f"scale {label}: operator RSS peak / end",
                     f"{s['operator_rss_peak_mb']:.0f} / {s['operator_rss_end_mb']:.0f} MB", "",
                     f"<= {RSS_BAR_MB:.0f} MB", s["operator_rss_peak_mb"] <= RSS_BAR_MB))
    widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
    print(f"operator bench ({'quick' if a.quick else 'full'}, --workers {a.workers}, "
          f"kube-apiserver {version}):", file=sys.stderr)
    for r in rows:
        verdict = "" if r[4] is None else ("pass" if r[4] else "FAIL")
        print("  " + "  ".join(str(c).ljust(widths[i]) for i, c in enumerate(r[:4])) + f"  {verdict}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
