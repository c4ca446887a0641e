"""The operator on the Kubernetes API emulator: how fast a LakeWriter becomes a driver pod, at scale.

    python bench/operator_bench.py [--latency-writers 60] [--tables 20] [--writers 200] [--quick]

The real operator (`python -m lakeoperator`, 8 workers) runs as a process against the API emulator
(tests/support/kube_api.py, over HTTP on 127.0.0.1) with the Weir CRDs; no kubelet: the figure ends
when the driver pod EXISTS in the API (what the operator controls), not when Spark runs.

  latency   LakeWriters created one at a time, each on a Ready table: create -> its driver pod seen by a
            pod watch. The reconcile behind it: the writer's event, GET writer + table + pod, PUT status
            with the submission id, the status event, GET again, POST pod. Floor (same run, same
            client): a pod created directly and seen by the same watch.
  scale     20 LakeTables (on local disk) and 200 LakeWriters created at once, from scratch: seconds until
            every writer has its driver pod and status phase Submitted, and until every table is Ready.
  rss       the operator process's resident memory, sampled every 0.1 s through the run (peak) and at
            the end (psutil).

Bars (issue 10): latency p50 <= 0.3 s; scale <= 30 s; RSS <= 200 MB. Prints JSON (bench/run.py).
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
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "operator")]

from tests.support.kube_api import KubeApi, KubeClient, resource_path  # noqa: E402
from tests.support.operator import OperatorProcess, weir_path  # noqa: E402

PODS = resource_path("v1", "pods", "default")


class PodWatch:
    """Every pod the API server reports, with the monotonic time this client first saw it."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.seen: dict[str, float] = {}
        self.cond = threading.Condition()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        version = self.client.get(PODS)["metadata"]["resourceVersion"]
        for event in self.client.watch(PODS, timeout=600, resourceVersion=version):
            if event["type"] == "ADDED":
                with self.cond:
                    self.seen.setdefault(event["object"]["metadata"]["name"], time.monotonic())
                    self.cond.notify_all()

    def wait(self, predicate: Any, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: predicate(self.seen), timeout)


class RssSampler:
    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.peak = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def now(self) -> int:
        return sum(p.memory_info().rss for p in [self.process, *self.process.children(recursive=True)])

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                self.peak = max(self.peak, self.now())
            except psutil.NoSuchProcess:
                return


def table(work: Path, name: str) -> dict[str, Any]:
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable", "metadata": {"name": name},
            "spec": {"location": str(work / "lake" / name), "recordKey": ["id"], "orderingField": "ts",
                     "buckets": 1, "schema": [{"name": "id", "type": "int64", "nullable": False},
                                              {"name": "ts", "type": "int64"}]}}


def writer(work: Path, name: str, table_name: str) -> dict[str, Any]:
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter", "metadata": {"name": name},
            "spec": {"tableRef": {"name": table_name}, "mode": "batch",
                     "source": {"format": "parquet", "path": str(work / "input")},
                     "spark": {"mode": "local", "localCores": 1}}}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def wait_ready(client: KubeClient, names: list[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending and time.monotonic() < deadline:
        items = client.get(weir_path("LakeTable"))["items"]
        pending -= {o["metadata"]["name"] for o in items if (o.get("status") or {}).get("phase") == "Ready"}
        if pending:
            time.sleep(0.05)
    if pending:
        raise RuntimeError(f"tables not Ready after {timeout}s: {sorted(pending)[:5]}")


def latency(api: KubeApi, work: Path, n: int) -> dict[str, Any]:
    client = api.client()
    watch = PodWatch(client)
    client.create(weir_path("LakeTable"), table(work, "lat"))
    wait_ready(client, ["lat"], 60)
    floors, samples = [], []
    for i in range(max(5, n // 5)):   # floor: the same client creating a pod and the watch seeing it
        name = f"floor-{i}"
        t0 = time.monotonic()
        client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                             "spec": {"containers": [{"name": "c", "image": "x"}]}})
        watch.wait(lambda seen, name=name: name in seen, 10)
        floors.append(watch.seen[name] - t0)
    for i in range(n):
        name = f"w-{i:04d}"
        before = set(watch.seen)
        t0 = time.monotonic()
        client.create(weir_path("LakeWriter"), writer(work, name, "lat"))
        if not watch.wait(lambda seen, before=before: len(seen) > len(before), 30):
            raise RuntimeError(f"no driver pod for {name} within 30 s")
        new = next(p for p in watch.seen if p not in before)
        samples.append(watch.seen[new] - t0)
    return {"writers": n, "p50_s": statistics.median(samples), "p90_s": percentile(samples, 0.9),
            "max_s": max(samples), "floor_p50_s": statistics.median(floors),
            "ratio_p50_vs_floor": statistics.median(samples) / statistics.median(floors),
            "bar_p50_s": 0.3, "pass": statistics.median(samples) <= 0.3}


def scale(api: KubeApi, work: Path, n_tables: int, n_writers: int) -> dict[str, Any]:
    client = api.client()
    watch = PodWatch(client)
    names = [f"t-{i:02d}" for i in range(n_tables)]
    t0 = time.monotonic()
    for name in names:
        client.create(weir_path("LakeTable"), table(work, name))
    for i in range(n_writers):
        client.create(weir_path("LakeWriter"), writer(work, f"s-{i:04d}", names[i % n_tables]))
    created = time.monotonic() - t0
    if not watch.wait(lambda seen: len(seen) >= n_writers, 300):
        raise RuntimeError(f"only {len(watch.seen)} of {n_writers} driver pods after 300 s")
    pods_at = max(watch.seen.values()) - t0
    deadline = time.monotonic() + 120
    all_at = tables_at = None
    while (all_at is None or tables_at is None) and time.monotonic() < deadline:
        items = client.get(weir_path("LakeWriter"))["items"]
        submitted = [o for o in items if (o.get("status") or {}).get("phase") == "Submitted"]
        if all_at is None and len(submitted) >= n_writers:
            all_at = time.monotonic() - t0
        ready = [o for o in client.get(weir_path("LakeTable"))["items"]
                 if (o.get("status") or {}).get("phase") == "Ready"]
        if tables_at is None and len(ready) >= n_tables:
            tables_at = time.monotonic() - t0
        time.sleep(0.02)
    if all_at is None or tables_at is None:
        raise RuntimeError(f"{len(submitted)} of {n_writers} writers Submitted, {len(ready)} of {n_tables} "
                           "tables Ready after 120 s more")
    per_writer = [len([p for p in client.get(PODS, labelSelector=f"weir.dev/writer={o['metadata']['name']}")
                       ["items"]]) for o in items[:20]]
    return {"tables": n_tables, "writers": n_writers, "create_requests_s": created,
            "all_driver_pods_s": pods_at, "all_submitted_s": all_at, "tables_ready_after_s": tables_at,
            "submitted": len(submitted), "pods": len(watch.seen),
            "pods_per_writer_sample": sorted(set(per_writer)),
            "bar_s": 30.0, "pass": all_at <= 30.0 and len(submitted) == n_writers}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-writers", type=int, default=60)
    ap.add_argument("--tables", type=int, default=20)
    ap.add_argument("--writers", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="10 latency samples, 4 tables x 20 writers")
    a = ap.parse_args()
    if a.quick:
        a.latency_writers, a.tables, a.writers = 10, 4, 20
    os.environ.setdefault("HOME", tempfile.mkdtemp(prefix="weir-bench-home-"))
    results: dict[str, Any] = {"machine_cores": os.cpu_count()}
    for part in ("latency", "scale"):
        with tempfile.TemporaryDirectory(prefix=f"weir-opbench-{part}-") as tmp, KubeApi() as api:
            work = Path(tmp)
            api.apply_crds(*sorted((ROOT / "crds").glob("weir.dev_*.yaml")))
            operator = OperatorProcess(api, work, workers=8).start()
            assert operator.process is not None
            rss = RssSampler(operator.process.pid)
            try:
                results[part] = latency(api, work, a.latency_writers) if part == "latency" else \
                    scale(api, work, a.tables, a.writers)
                results[part]["rss_end_mb"] = rss.now() / 2**20
            finally:
                rss.stop.set()
                operator.stop()
            results[part]["rss_peak_mb"] = rss.peak / 2**20
    peak = max(results["latency"]["rss_peak_mb"], results["scale"]["rss_peak_mb"])
    results["rss"] = {"peak_mb": peak, "bar_mb": 200, "pass": peak <= 200}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
