"""A Kafka writer whose Avro values name schema ids of a registry that does not answer backs off like one
whose brokers do not: its attempt ends `unavailable` (exit 5), reason SourceUnavailable, the message naming
the registry's URL, no restart budget spent; when the registry answers again, the next attempt decodes the
topic and the writer succeeds. Through `weir run -f`, the real broker and the real registry (stopped, then
started again on the same port; in memory, so its schema is registered again and gets the same id)."""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pytest

from lakecore import Table
from lakeoperator.dev.kafka import KafkaBroker
from tests.lakeoperator.test_a_kafka_writer_waits_out_an_unreachable_broker import ROOT, state, wait_for
from tests.support.fixtures import require, require_spark_connectors
from tests.support.kafka_broker import create_topic, produce
from tests.support.schema_registry import SchemaRegistry, schema_registry_missing_reason

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.registry, pytest.mark.slow,
              pytest.mark.timeout(700)]
TOPIC = "people"
AVRO = {"type": "record", "name": "person", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "ts", "type": "long"}]}


def manifests(bootstrap: str, registry_url: str) -> list[dict[str, Any]]:
    table = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable", "metadata": {"name": "people"},
             "spec": {"location": "lake/people", "recordKey": ["id"], "orderingField": "ts", "buckets": 1,
                      "schema": [{"name": "id", "type": "int64"}, {"name": "name", "type": "string"},
                                 {"name": "ts", "type": "int64"}]}}
    writer = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter", "metadata": {"name": "from-kafka"},
              "spec": {"tableRef": {"name": "people"}, "mode": "batch",
                       "source": {"kafka": {"bootstrapServers": bootstrap, "topics": [TOPIC],
                                            "value": {"format": "avro",
                                                      "schemaRegistry": {"url": registry_url}}}},
                       "restartPolicy": {"maxRestarts": 0, "maxInfraRestarts": 0,
                                         "backoff": {"initialSeconds": 2, "maxSeconds": 4}},
                       "spark": {"mode": "local", "localCores": 1, "driver": {"memory": "512m"}}}}
    return [table, writer]


def framed(schema_id: int, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO), record)
    return b"\0" + struct.pack(">I", schema_id) + out.getvalue()


def test_a_writer_backs_off_while_the_registry_is_down_and_goes_on_when_it_returns(
        tmp_path: Path, kafka_factory: Callable[[], KafkaBroker]) -> None:
    require_spark_connectors()
    require("A schema registry", schema_registry_missing_reason())
    broker = kafka_factory()
    registry = SchemaRegistry(tmp_path / "registry").start()
    try:
        schema_id = registry.register(f"{TOPIC}-value", AVRO)
        create_topic(broker.bootstrap_servers, TOPIC)
        produce(broker.bootstrap_servers, TOPIC,
                [(str(i), framed(schema_id, {"id": i, "name": f"p{i}", "ts": 1})) for i in range(20)])
        registry.stop()
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "all.yaml").write_text(
            "---\n".join(json.dumps(d) + "\n" for d in manifests(broker.bootstrap_servers, registry.url)))
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
        run = subprocess.Popen([sys.executable, "-c", "from lakeoperator.cli import app; app()", "run", "-f",
                                "m", "--timeout", "400"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
        try:
            def backing_off() -> dict[str, Any] | None:
                s = state(tmp_path)
                status = (s or {}).get("body", {}).get("status", {})
                return s if status.get("phase") == "BackingOff" and status.get("history") else None

            status = wait_for(backing_off, run, 240)["body"]["status"]
            said = f"the schema registry at {registry.url} did not answer"
            assert status["history"][-1]["cause"] == "unavailable" and status["history"][-1]["exitCode"] == 5
            assert status["attempts"]["failures"] == 0 and status["attempts"]["unavailable"] >= 1
            ready = {c["type"]: c for c in status["conditions"]}["Ready"]
            assert ready["reason"] == "SourceUnavailable" and said in ready["message"], ready

            registry.start()   # the same port; in memory: the same schema registered again gets the same id
            assert registry.register(f"{TOPIC}-value", AVRO) == schema_id
            out, err = run.communicate(timeout=300)
        finally:
            if run.poll() is None:
                run.kill()
                run.communicate()
    finally:
        registry.stop()
    assert run.returncode == 0, out[-3000:] + err[-3000:]
    assert "LakeWriter/from-kafka: Succeeded" in out, out
    rows = Table.open(str(tmp_path / "lake" / "people")).read()
    assert sorted(rows.column("id").to_pylist()) == list(range(20))
