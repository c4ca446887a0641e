"""Avro values (an inline writer schema) decode into the table's columns; a Debezium CDC topic — inserts,
updates, deletes, snapshot reads, tombstones and a replayed segment, in JSON with and without the
converter's schema wrapper — leaves the table equal to the source's final state."""

from __future__ import annotations

import io
import json
import random

import fastavro
import pyarrow as pa
import pytest

from lakecore import Table
from sparkjobs.kafka.bad_records import TOMBSTONES_KEY
from tests.sparkjobs.kafka.support import commits_extra, new_topic, rows_by_key, run_stream, stream_args
from tests.support.fixtures import require_spark_connectors
from tests.support.kafka_broker import produce

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("name", pa.string()),
                    ("score", pa.float64())])
AVRO = {"type": "record", "name": "player", "fields": [
    {"name": "id", "type": "long"}, {"name": "ts", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "score", "type": "double"}, {"name": "extra", "type": "string"}]}


@pytest.fixture(autouse=True)
def _connectors() -> None:
    require_spark_connectors()


def avro(record: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO), record)
    return out.getvalue()


def test_avro_values_with_an_inline_schema(spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "avro")
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    produce(kafka_broker.bootstrap_servers, topic,
            [(str(i), avro({"id": i, "ts": t, "name": f"p{i}-{t}", "score": i / 2, "extra": "x"}))
             for t in (2, 1) for i in range(10)])
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), value_format="avro",
                           avro_schema=json.dumps(AVRO)))
    got = rows_by_key(table.uri)
    assert {k: (r["name"], r["score"]) for k, r in got.items()} == {i: (f"p{i}-2", i / 2) for i in range(10)}


class Source:
    """A source database table and the Debezium events its changes make (one per change, source ts_ms)."""

    def __init__(self) -> None:
        self.rows: dict[int, dict] = {}
        self.events: list[tuple[str, str | None]] = []
        self.clock = 1_000

    def change(self, op: str, row: dict, *, wrapped: bool) -> None:
        self.clock += 1
        before = self.rows.get(row["id"])
        after = None if op == "d" else {**(before or {}), **row}
        if op == "d":
            del self.rows[row["id"]]
        else:
            self.rows[row["id"]] = after
        event = {"before": before, "after": after, "op": op, "ts_ms": self.clock + 5,
                 "source": {"ts_ms": self.clock, "db": "shop", "table": "players"}}
        value = {"schema": {"type": "struct"}, "payload": event} if wrapped else event
        self.events.append((json.dumps({"id": row["id"]}), json.dumps(value)))
        if op == "d":
            self.events.append((json.dumps({"id": row["id"]}), None))   # the tombstone after a delete


def test_a_debezium_topic_leaves_the_table_equal_to_the_sources_final_state(spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "cdc", partitions=1)
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    source, rng = Source(), random.Random(7)
    for i in range(30):
        source.change("r", {"id": i, "name": f"n{i}", "score": 0.0}, wrapped=False)   # the snapshot
    first = len(source.events)
    for step in range(200):
        ids = sorted(source.rows)
        if not ids or rng.random() < 0.25:
            source.change("c", {"id": 100 + step, "name": f"new{step}", "score": 1.0}, wrapped=step % 2 == 0)
        elif rng.random() < 0.3:
            source.change("d", {"id": rng.choice(ids)}, wrapped=step % 2 == 0)
        else:
            source.change("u", {"id": rng.choice(ids), "score": float(step)}, wrapped=step % 2 == 0)
    replayed = source.events[first:first + 80]     # the connector restarted and sent a segment again
    produce(kafka_broker.bootstrap_servers, topic, source.events[:first + 120])
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), value_format="debezium"))
    produce(kafka_broker.bootstrap_servers, topic, [*replayed, *source.events[first + 120:]])
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), value_format="debezium"))

    got = {k: (r["name"], r["score"]) for k, r in rows_by_key(table.uri).items()}
    assert got == {k: (r["name"], r["score"]) for k, r in source.rows.items()}
    assert sum(int(e.get(TOMBSTONES_KEY, 0)) for e in commits_extra(table.uri)) > 0
