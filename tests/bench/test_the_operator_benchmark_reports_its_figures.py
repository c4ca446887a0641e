"""`bench/operator_bench.py --quick` runs end to end (a real API server of its own, the real operator,
watches) and reports every figure with its bar: the smoke check that keeps the benchmark working.
Thresholds are the benchmark's business, not this test's (no timed assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import require_controlplane

pytestmark = [pytest.mark.k8s]

ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_operator_benchmark_reports_latency_scale_and_rss(tmp_path: Path) -> None:
    require_controlplane()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator")])}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "operator_bench.py"), "--quick",
                           "--keep", str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout)
    latency = out["latency"]
    assert latency["writer_create_to_pod_s"]["n"] == latency["floor_pod_create_to_seen_s"]["n"] == 5
    assert 0 < latency["floor_pod_create_to_seen_s"]["p50"] <= latency["writer_create_to_pod_s"]["max"]
    assert latency["bar_p50_s"] == 0.3 and isinstance(latency["pass"], bool)
    live = out["scale_live"]
    assert (live["tables"], live["writers"]) == (2, 20)
    assert live["all_tables_ready_s"] > 0 and live["all_writers_pod_and_submitted_s"] > 0
    assert live["floor_pods_created_and_seen_s"] > 0 and live["judged"] is False and live["pass"] is None
    assert out["scale_cold_start"] is None and out["api_server"].startswith("v1.")
    assert live["operator_rss_peak_mb"] > 0 and out["rss"]["bar_mb"] == 200
    assert "writers pod + Submitted" in done.stderr
