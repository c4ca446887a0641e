"""Seed scenario 000 on Kafka through `weir run -f` (the local launcher): three topics, three streaming
writers each owning a column group of one wide table under non-blocking concurrency, events out of order
on each group's ordering field, a compaction service. The table equals each group's latest values joined
on the key, computed from the messages sent (scenario_000.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakeoperator.dev.kafka import KafkaBroker
from tests.lakeoperator import scenario_000
from tests.support.fixtures import require_spark_connectors

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(700)]
ROOT = Path(__file__).resolve().parents[2]


def test_three_topics_stitch_one_wide_table_as_the_join_of_each_groups_latest_values(
        tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    require_spark_connectors()
    topics, expected = scenario_000.feed(kafka_broker)
    location = str(tmp_path / "lake" / "devices")
    (tmp_path / "m").mkdir()
    docs = scenario_000.manifests(location, topics, kafka_broker.bootstrap_servers)
    (tmp_path / "m" / "all.yaml").write_text("---\n".join(json.dumps(d) + "\n" for d in docs))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    ran = subprocess.run([sys.executable, "-c", "from lakeoperator.cli import app; app()", "run", "-f", "m",
                          "--timeout", "500"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-4000:]
    scenario_000.check(location, topics, expected, kafka_broker)
