"""Spark retries a task that died after writing its file: the retry writes under its own token, the
driver deletes the dead attempt's file (named by a marker, reported by no stat) before committing,
and the table reads as before. Runs in a process of its own, whose Spark allows 2 attempts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_dead_attempts_file_is_deleted_and_the_retry_commits(spark, tmp_path):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([sys.executable, "-m", "tests.sparkjobs.retried_tasks", str(tmp_path)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    out = json.loads(lines[-1])
    assert out["same"] and out["operations"] == 2
    assert len(out["written"]) == 3  # two operations, one of them written twice (attempts 0 and 1)
    assert len(out["deleted"]) == 1 and out["deleted"][0] not in out["stats"]
    assert out["left"] == out["stats"]
    assert any(path.split("_")[1].endswith("-1") for path in out["stats"]), out["stats"]  # attempt 1's token
