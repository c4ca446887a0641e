"""`bench/scan_bench.py --quick` builds a small merge-on-read table with logs and reports the streaming
scan's peak RSS above baseline and its throughput against `Table.read`, with the bars: the smoke check
that keeps the benchmark working. Thresholds are the benchmark's business, not this test's (no timed
assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_scan_benchmark_reports_memory_and_throughput(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator")])}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "scan_bench.py"), "--quick"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout)
    assert out["rows"] == 210_000 and out["slices"] == 8 and out["in_flight"] >= 2
    assert out["table_arrow_mb"] > 0 and out["scan_s"] > 0 and out["read_s"] > 0
    assert out["scan_vs_read_throughput"] > 0 and out["scan_peak_rss_above_baseline_mb"] >= 0
    assert [r["rows"] for r in out["runs"]["scan"]] == [r["rows"] for r in out["runs"]["read"]] == [210_000]
    assert out["bars"] == {"scan_peak_rss_above_baseline_mb": 1024.0, "scan_vs_read_throughput": 0.8}
    assert "above baseline" in done.stderr
