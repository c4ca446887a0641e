"""`bench/kafka_bench.py --quick` runs end to end (a real Kafka broker, local Spark with the pinned
connectors, the batch and the streaming Kafka writers) and reports the throughput ratio against Spark's own
Parquet landing of the same topic and the produce -> visible latency with their targets: the smoke check
that keeps the benchmark working. Thresholds are the benchmark's business, not this test's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import require, require_spark, require_spark_connectors
from tests.support.kafka_broker import kafka_missing_reason

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]


def test_the_quick_kafka_benchmark_reports_throughput_ratio_and_latency(tmp_path: Path) -> None:
    require_spark()
    require_spark_connectors()
    require("A Kafka broker", kafka_missing_reason())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator")]),
           "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "kafka_bench.py"), "--quick"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout)
    assert out["messages"] == 5_000
    speed = out["throughput"]
    assert speed["rows"] == {"floor": 5_000, "weir": 5_000}
    # the seconds are printed rounded, the ratio from the unrounded ones
    assert speed["ratio"] == pytest.approx(speed["weir_s"] / speed["floor_s"], abs=0.015)
    assert speed["target_ratio"] == 1.3
    latency = out["latency"]
    assert latency["samples"] == 3 and 0 < latency["p50_s"] <= latency["max_s"]
    assert latency["target_p50_s"] == latency["trigger_s"] + 2
