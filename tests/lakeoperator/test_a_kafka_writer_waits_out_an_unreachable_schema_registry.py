"""A Kafka writer whose Avro values name schema ids of a registry that does not answer backs off like one
whose brokers do not: its attempt ends `unavailable` (exit 5), reason SourceUnavailable, the message naming
the registry's URL, no restart budget spent; when the registry answers again, the next attempt decodes the
topic and the writer succeeds. Through `weir run -f`, the real broker and the real registry (stopped, then
started again on the same port; in memory, so its schema is registered again and gets the same id)."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pytest

from lakecore import Table
from lakeoperator.dev.kafka import KafkaBroker
from tests.lakeoperator.test_a_kafka_writer_waits_out_an_unreachable_broker import (
    TOPIC,
    backing_off,
    manifests,
    start_weir_run,
)
from tests.support.fixtures import require, require_spark_connectors
from tests.support.kafka_broker import create_topic, produce
from tests.support.schema_registry import SchemaRegistry, schema_registry_missing_reason

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.registry, pytest.mark.slow,
              pytest.mark.timeout(700)]
AVRO = {"type": "record", "name": "person", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "ts", "type": "long"}]}


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
        value = {"format": "avro", "schemaRegistry": {"url": registry.url}}
        run = start_weir_run(tmp_path, manifests(broker.bootstrap_servers, value))
        try:
            status = backing_off(tmp_path, run)["body"]["status"]
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
