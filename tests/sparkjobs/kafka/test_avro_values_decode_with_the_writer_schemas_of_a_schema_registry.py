"""Avro values in the Confluent wire format (magic byte 0, a 4-byte schema id, Avro binary) decode with each
id's writer schema from a real Confluent-compatible schema registry (Apicurio Registry): a topic written
under two schema versions, the second adding a field, leaves the table with every message's row, the field a
message's schema lacks null. A message without the header, with an id the registry does not know, or whose
bytes are not Avro of its schema is a bad message under the writer's policy (fail, skip, deadLetter). A
registry that does not answer is the source being unavailable (exit 5), naming its URL."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from lakecore import Table
from lakeoperator.dev.zookeeper import free_port
from sparkjobs.contract import EXIT_UNAVAILABLE, BatchWriteArgs
from sparkjobs.kafka.bad_records import SKIPPED_KEY, BadMessages
from sparkjobs.kafka.source import SourceUnavailable
from tests.sparkjobs.kafka.support import (
    commits_extra,
    new_topic,
    nothing_committed,
    rows_by_key,
    run_stream,
    stream_args,
)
from tests.support.fixtures import require_spark_connectors
from tests.support.kafka_broker import KafkaBroker, produce
from tests.support.schema_registry import SchemaRegistry

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.registry]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("name", pa.string()),
                    ("score", pa.float64())])
V1 = {"type": "record", "name": "player", "fields": [
    {"name": "id", "type": "long"}, {"name": "ts", "type": "long"}, {"name": "name", "type": "string"}]}
# the next version of the producer's schema: a field added (with a default, as compatibility asks)
V2 = {**V1, "fields": [*V1["fields"], {"name": "score", "type": ["null", "double"], "default": None}]}
UNKNOWN_ID = 987654


@pytest.fixture(autouse=True)
def _connectors() -> None:
    require_spark_connectors()


def framed(schema_id: int, schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """What a Confluent Avro serializer sends: magic byte 0, the schema id (big-endian), Avro binary."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return b"\0" + struct.pack(">I", schema_id) + out.getvalue()


def produce_two_versions(broker: KafkaBroker, registry: SchemaRegistry, topic: str,
                         *, bad: bool) -> dict[int, tuple[int, str, float | None]]:
    """Partition 0: ids 0-4 under the first schema, 5-9 under the second, then 0 again under the second
    (newer ts); with `bad`, three bad messages at offsets 11-13 (no header, an unknown id, not Avro of its
    schema). The rows the table must hold: id -> (ts, name, score)."""
    v1, v2 = registry.register(f"{topic}-value", V1), registry.register(f"{topic}-value", V2)
    assert v1 != v2
    messages = [(str(i), framed(v1, V1, {"id": i, "ts": 1, "name": f"p{i}"})) for i in range(5)]
    messages += [(str(i), framed(v2, V2, {"id": i, "ts": 1, "name": f"p{i}", "score": i / 2}))
                 for i in range(5, 10)]
    messages.append(("0", framed(v2, V2, {"id": 0, "ts": 2, "name": "p0-again", "score": 9.5})))
    if bad:
        messages += [("nohdr", framed(v1, V1, {"id": 50, "ts": 1, "name": "x"})[5:]),
                     ("unknown", framed(UNKNOWN_ID, V1, {"id": 51, "ts": 1, "name": "x"})),
                     ("cut", framed(v2, V2, {"id": 52, "ts": 1, "name": "x", "score": 1.0})[:7])]
    produce(broker.bootstrap_servers, topic, messages, partition=0)
    expected: dict[int, tuple[int, str, float | None]] = {i: (1, f"p{i}", None) for i in range(1, 5)}
    expected |= {i: (1, f"p{i}", i / 2) for i in range(5, 10)}
    expected[0] = (2, "p0-again", 9.5)
    return expected


def table_at(tmp_path) -> Table:
    return Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)


def as_tuples(uri: str) -> dict[int, tuple[int, str, float | None]]:
    return {k: (r["ts"], r["name"], r["score"]) for k, r in rows_by_key(uri).items()}


def test_messages_under_two_schema_ids_land_with_the_tables_columns(spark, kafka_broker, schema_registry,
                                                                     tmp_path):
    topic = new_topic(kafka_broker, "registry", partitions=1)
    expected = produce_two_versions(kafka_broker, schema_registry, topic, bad=False)
    table = table_at(tmp_path)
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), value_format="avro",
                           schema_registry_url=schema_registry.url))
    assert as_tuples(table.uri) == expected


def test_bad_messages_fail_the_batch_naming_the_first(spark, kafka_broker, schema_registry, tmp_path):
    topic = new_topic(kafka_broker, "registry-fail", partitions=1)
    produce_two_versions(kafka_broker, schema_registry, topic, bad=True)
    table = table_at(tmp_path)
    said = (rf"message {topic}/0@11 does not decode \(not in the Confluent wire format.*3 of the batch's 14 "
            "messages are bad")
    with pytest.raises(BadMessages, match=said):
        run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), value_format="avro",
                               schema_registry_url=schema_registry.url))
    assert nothing_committed(table.uri)


def test_bad_messages_are_skipped_and_counted(spark, kafka_broker, schema_registry, tmp_path):
    topic = new_topic(kafka_broker, "registry-skip", partitions=1)
    expected = produce_two_versions(kafka_broker, schema_registry, topic, bad=True)
    table = table_at(tmp_path)
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), value_format="avro",
                           schema_registry_url=schema_registry.url, bad_records="skip"))
    assert as_tuples(table.uri) == expected
    assert commits_extra(table.uri)[-1][SKIPPED_KEY] == "3"


def test_bad_messages_are_dead_lettered_with_why(spark, kafka_broker, schema_registry, tmp_path):
    topic = new_topic(kafka_broker, "registry-dead", partitions=1)
    expected = produce_two_versions(kafka_broker, schema_registry, topic, bad=True)
    table = table_at(tmp_path)
    dead = str(tmp_path / "dead")
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), value_format="avro",
                           schema_registry_url=schema_registry.url, bad_records="deadLetter",
                           dead_letter_table=dead))
    assert as_tuples(table.uri) == expected
    errors = {r["offset"]: r["error"] for r in Table.open(dead).read().to_pylist()}
    assert sorted(errors) == [11, 12, 13]
    assert errors[11].startswith("not in the Confluent wire format")
    assert errors[12] == f"schema id {UNKNOWN_ID} is not in the schema registry"
    assert errors[13].startswith("not Avro of its schema (id ") and "from the schema registry" in errors[13]


def test_a_registry_that_does_not_answer_is_the_source_unavailable(spark, kafka_broker, schema_registry,
                                                                   tmp_path, capsys):
    from sparkjobs import batch_write

    topic = new_topic(kafka_broker, "registry-down", partitions=1)
    produce_two_versions(kafka_broker, schema_registry, topic, bad=False)
    table = table_at(tmp_path)
    nobody = f"http://127.0.0.1:{free_port()}/apis/ccompat/v6"   # nothing listens there
    with pytest.raises(SourceUnavailable, match=f"the schema registry at {nobody} did not answer"):
        run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), value_format="avro",
                               schema_registry_url=nobody))
    args = BatchWriteArgs(table=table.uri, kafka_bootstrap_servers=kafka_broker.bootstrap_servers,
                          kafka_topics=(topic,), value_format="avro", schema_registry_url=nobody)
    assert batch_write.main(args.to_argv()) == EXIT_UNAVAILABLE
    said = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert said["outcome"] == "unavailable" and nobody in said["error"], said
    assert nothing_committed(table.uri)
