"""Seed scenario 000 on Kafka through the real operator on a real API server, with the process kubelet running
the Spark drivers: the manifests of examples/demo/stitch (the demo's test runs them on the local launcher),
topics and expected table of tests/lakeoperator/scenario_000.py. Every writer succeeds, the compaction
service runs once after their three delta commits, and the table equals each group's latest values joined on
the key."""

from __future__ import annotations

import pytest

from lakeoperator.dev.kafka import KafkaBroker
from tests.lakeoperator import scenario_000
from tests.support.fixtures import require_spark_connectors
from tests.support.operator import Cluster

pytestmark = [pytest.mark.k8s, pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow,
              pytest.mark.timeout(700)]


def test_three_kafka_writers_and_a_compaction_stitch_the_table_through_the_operator(
        cluster: Cluster, kafka_broker: KafkaBroker) -> None:
    require_spark_connectors()
    topics, expected = scenario_000.feed(kafka_broker)
    location = str(cluster.work / "lake" / "devices")
    docs = scenario_000.manifests(location, topics, kafka_broker.bootstrap_servers)
    for doc in docs:
        doc["metadata"]["namespace"] = cluster.namespace   # the manifests' loader says default
    for doc in docs:
        if doc["kind"] == "LakeTable":
            cluster.apply(doc)
    cluster.wait_status("LakeTable", "devices", lambda s: s.get("phase") == "Ready", timeout=60)
    for doc in docs:
        if doc["kind"] != "LakeTable":
            cluster.apply(doc)
    for group in scenario_000.GROUPS:
        cluster.wait_status("LakeWriter", f"devices-{group}", lambda s: s.get("phase") == "Succeeded",
                            timeout=420)
    cluster.wait_status("TableService", "devices-compaction",
                        lambda s: (s.get("lastRun") or {}).get("outcome") == "success", timeout=300)
    scenario_000.check(location, topics, expected, kafka_broker, namespace=cluster.namespace)
