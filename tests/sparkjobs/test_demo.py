"""`make demo`'s Spark part runs end to end: three streaming writers, a Spark compaction, a read
through the weir data source equal to the join of the streams' latest values (exit code 0)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_spark_demo_runs_and_agrees_with_the_join(spark, tmp_path):
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    proc = subprocess.run([sys.executable, "-m", "sparkjobs.demo", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Equal to joining each stream's latest values: True" in proc.stdout
    assert "none aborted" in proc.stdout
