"""bench/operator_bench.py keeps working: its quick mode runs the real operator against the emulator and
reports every figure (the figures themselves are docs/benchmarks.md's business, not a test's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.k8s
ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_operator_benchmark_reports_every_figure(tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path)}
    ran = subprocess.run([sys.executable, str(ROOT / "bench" / "operator_bench.py"), "--quick"], env=env,
                         capture_output=True, text=True, timeout=240)
    assert ran.returncode == 0, ran.stderr[-3000:]
    figures = json.loads(ran.stdout)
    assert figures["latency"]["writers"] == 10 and figures["latency"]["p50_s"] > 0
    assert figures["scale"]["submitted"] == figures["scale"]["writers"] == figures["scale"]["pods"]
    assert figures["scale"]["pods_per_writer_sample"] == [1]   # never two pods for one writer
    assert figures["rss"]["peak_mb"] > 0
