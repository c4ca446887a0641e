"""`bench/concurrency_bench.py`, NBCC part, at a tiny size (a real ZooKeeper, writer processes): every run
is verified by the benchmark and reports where the table lock's time went — wait and hold per writer,
hold by the lakecore step that took it. The lock figures once read zero for weeks because lakecore
wraps the table's lock and the timing wrapper listened on the wrong method; this keeps them real. No
timed assertions: thresholds are the benchmark's business."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.zookeeper]

ROOT = Path(__file__).resolve().parents[2]


def test_the_nbcc_benchmark_reports_lock_wait_and_hold_per_step(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator")])}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "concurrency_bench.py"), "--skip-critical",
                           "--rounds", "1", "--writers", "1,2", "--upserts", "4", "--rows", "500"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    runs = [run for pair in json.loads(done.stdout)["nbcc_throughput"]["rounds"] for run in pair]
    assert sorted(r["writers"] for r in runs) == [1, 2]
    for run in runs:
        assert run["conflicts"] == 0 and run["completed_writes"] == 4 * run["writers"]
        assert run["lock_acquire_s_per_writer"] >= 0 and run["lock_held_s_per_writer"] >= 0
        held = run["lock_held_s_by_step"]   # a step appears once a span of it was recorded (figures rounded)
        assert {"begin_write", "commit_write"} <= set(held), held
