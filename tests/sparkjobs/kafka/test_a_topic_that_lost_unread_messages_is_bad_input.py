"""A topic deleted and created again (its offsets begin again below those the table recorded) is bad
input naming what happened, for a batch writer, a streaming writer without its checkpoint and one with
it: Spark's "offset was changed ... some data may have been missed" was a generic failure, retried for
ever (`weir run` looped on it). Nothing is written, and the table keeps what it had."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest
from confluent_kafka.admin import AdminClient

from lakecore import Table
from sparkjobs.contract import EXIT_BAD_INPUT, BatchWriteArgs
from sparkjobs.kafka.source import KafkaDataLost
from tests.sparkjobs.kafka.support import new_topic, rows_by_key, run_stream, send_json, stream_args
from tests.support.fixtures import require_spark_connectors
from tests.support.kafka_broker import create_topic

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("v", pa.string())])
SAID = r"Kafka no longer holds messages this writer has not read \(partition .*-0 now ends at offset 2, " \
       r"before offset 5, from which this writer would read on\)"


@pytest.fixture(autouse=True)
def _connectors() -> None:
    require_spark_connectors()


def recreate(bootstrap: str, topic: str) -> None:
    """Delete the topic and create it again, empty (deletion completes in the background)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(timeout=30)
    deadline = time.monotonic() + 60
    while True:
        try:
            create_topic(bootstrap, topic, partitions=1)
            return
        except Exception:   # still being deleted
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_a_recreated_topic_is_told_not_retried(spark, kafka_broker, tmp_path, capsys) -> None:
    from sparkjobs import batch_write

    topic = new_topic(kafka_broker, "recreated", partitions=1)
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "first"} for i in range(5)])
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                         merge_mode="event_time")
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp")))
    assert sorted(rows_by_key(table.uri)) == list(range(5))
    before = len(Table.open(table.uri).timeline().completed)

    recreate(kafka_broker.bootstrap_servers, topic)
    send_json(kafka_broker, topic, [{"id": i, "ts": 2, "v": "second"} for i in range(10, 12)])
    for checkpoint in ("cp", "cp-new"):   # with its Spark checkpoint, and starting from the table's offsets
        with pytest.raises(KafkaDataLost, match=SAID):
            run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / checkpoint)))
    args = BatchWriteArgs(table=table.uri, kafka_bootstrap_servers=kafka_broker.bootstrap_servers,
                          kafka_topics=(topic,), extra={"writer": "w1"})
    assert batch_write.main(args.to_argv()) == EXIT_BAD_INPUT
    said = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert said["outcome"] == "bad_input" and "Kafka no longer holds messages" in said["error"], said
    assert {k: r["v"] for k, r in rows_by_key(table.uri).items()} == {i: "first" for i in range(5)}
    assert len([i for i in Table.open(table.uri).timeline().completed if i.action != "rollback"]) == before
