"""`bench/supervision_bench.py --quick` runs end to end (a real ZooKeeper, lakecore writers, the
operator's supervisor) and reports every figure with its bar: the smoke check that keeps the benchmark
working. Thresholds are the benchmark's business, not this test's (no timed assertions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.quick import run_quick

pytestmark = [pytest.mark.zookeeper]


def test_the_quick_supervision_benchmark_reports_latency_bytes_lost_and_cost(tmp_path: Path) -> None:
    out, stderr = run_quick("supervision_bench.py", tmp_path)
    latency = out["latency"]
    assert latency["rounds"] == 3 and latency["floor_p50_s"] > 0 and 0 < latency["p50_s"] <= latency["max_s"]
    rfc56 = out["rfc56"]
    assert rfc56["stopped"] and rfc56["rounds"] == 2
    assert 0 < rfc56["lost_share_median"] <= rfc56["lost_share"] < 1
    cost = out["cost"]
    assert cost["writers"] == 16 and cost["scans"] > 0 and cost["rss_mb"] > 0
    assert out["bars"] == {"stop_p50_s": 1.0, "stop_p99_s": 2.0, "rfc56_lost_share": 0.05, "cpu_share": 0.1,
                           "rss_mb": 200.0}
    assert out["pass"] is None and "stop latency" in stderr
