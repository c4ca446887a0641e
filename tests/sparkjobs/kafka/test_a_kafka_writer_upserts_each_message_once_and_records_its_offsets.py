"""A Kafka streaming writer (JSON values) upserts what its topic holds — the newest ordering value per key
wins, whatever order the messages came in — and each commit records the offsets the table now holds; run
again it goes on from where it stopped, and with its Spark checkpoint lost it starts where the table says,
neither from the beginning nor from the end."""

from __future__ import annotations

import random
import shutil

import pyarrow as pa
import pytest

from lakecore import Table
from sparkjobs.kafka.offsets import OFFSETS_KEY, decode
from tests.sparkjobs.kafka.support import (
    commits_extra,
    new_topic,
    rows_by_key,
    run_stream,
    send_json,
    stream_args,
)
from tests.support.fixtures import require_spark_connectors

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("v", pa.string())])


@pytest.fixture(autouse=True)
def _connectors() -> None:
    require_spark_connectors()


def events(keys: range, versions: int, seed: int) -> list[dict]:
    out = [{"id": k, "ts": t, "v": f"{k}@{t}"} for k in keys for t in range(versions)]
    random.Random(seed).shuffle(out)   # out of order on the ordering field
    return out


def test_the_newest_per_key_wins_and_offsets_are_recorded(spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "upsert")
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    send_json(kafka_broker, topic, events(range(40), 3, seed=1))

    out = run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp")))

    assert out["instants"], out
    got = rows_by_key(table.uri)
    assert {k: r["v"] for k, r in got.items()} == {k: f"{k}@2" for k in range(40)}
    recorded = decode(commits_extra(table.uri)[-1][OFFSETS_KEY])
    assert recorded is not None and sum(recorded[topic].values()) == 120


def test_run_again_it_goes_on_and_without_its_checkpoint_it_starts_where_the_table_says(
        spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "resume")
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                         table_type="copy_on_write")
    checkpoint = str(tmp_path / "cp")
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "first"} for i in range(10)])
    run_stream(stream_args(table, kafka_broker, topic, checkpoint))
    send_json(kafka_broker, topic, [{"id": i, "ts": 2, "v": "second"} for i in range(10, 20)])
    run_stream(stream_args(table, kafka_broker, topic, checkpoint))
    assert len(rows_by_key(table.uri)) == 20

    shutil.rmtree(checkpoint)   # the checkpoint is lost: the table's offsets say where to start
    # a row the writer already wrote, deleted behind its back: read again from the beginning, it would come
    # back; read from the end, the messages sent meanwhile would be lost
    Table.open(table.uri).write(pa.table({"id": [0]}), "delete")
    send_json(kafka_broker, topic, [{"id": i, "ts": 3, "v": "third"} for i in range(20, 25)])
    out = run_stream(stream_args(table, kafka_broker, topic, checkpoint))

    got = rows_by_key(table.uri)
    assert sorted(got) == list(range(1, 25)) and got[24]["v"] == "third"
    assert out["instants"]
    recorded = decode(commits_extra(table.uri)[-1][OFFSETS_KEY])
    assert recorded is not None and sum(recorded[topic].values()) == 25
