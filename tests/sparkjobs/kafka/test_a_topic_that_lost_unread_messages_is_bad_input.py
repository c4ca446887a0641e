"""A topic deleted and created again (its offsets begin again below those the table recorded, or its
id is not the one recorded with them) is bad input naming what happened, for a batch writer, a
streaming writer without its checkpoint and one with it: Spark's "offset was changed ... some data
may have been missed" was a generic failure, retried for ever (`weir run` looped on it). Nothing is
written, and the table keeps what it had.

With `onDataLoss: skip` (`--kafka-on-data-loss skip`) a writer goes on instead, at the oldest offsets
Kafka holds: messages retention deleted unread are skipped, a recreated topic is read from its start
(a Spark checkpoint naming the old offsets is moved aside, not deleted), and the next commit records
what was lost under `weir.kafka.lost`. There was no way on but a new table."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest
from confluent_kafka.admin import AdminClient

from lakecore import Table
from sparkjobs.contract import EXIT_BAD_INPUT, BatchWriteArgs
from sparkjobs.kafka.offsets import LOST_KEY, OFFSETS_KEY, TOPIC_IDS_KEY
from sparkjobs.kafka.source import KafkaDataLost
from tests.sparkjobs.kafka.support import (
    commits_extra,
    new_topic,
    rows_by_key,
    run_stream,
    send_json,
    stream_args,
)
from tests.support.fixtures import require_spark_connectors
from tests.support.kafka_broker import create_topic

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("v", pa.string())])
SAID = r"Kafka no longer holds messages this writer has not read: topic\(s\) recreated-\S+ \(id \S+, now " \
       r"\S+\) were deleted and created again since its last commit"


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


def delete_unread(bootstrap: str, topic: str, before: int) -> None:
    """Delete the messages of partition 0 below offset `before`, as retention does."""
    from confluent_kafka import TopicPartition

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, before)]).values():
        future.result(timeout=30)


def lost_of(uri: str) -> list[dict]:
    return [json.loads(e[LOST_KEY]) for e in commits_extra(uri) if LOST_KEY in e]


def test_messages_retention_deleted_unread_are_skipped_when_told(spark, kafka_broker, tmp_path) -> None:
    topic = new_topic(kafka_broker, "retention", partitions=1)
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "read"} for i in range(3)])
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                         merge_mode="event_time")
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp")))
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "unread"} for i in range(3, 8)])  # offsets 3..7
    delete_unread(kafka_broker.bootstrap_servers, topic, 6)   # 3, 4 and 5 go before the writer reads them

    with pytest.raises(KafkaDataLost, match="onDataLoss: skip"):   # the default fails, naming the way on
        run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp-new")))
    assert sorted(rows_by_key(table.uri)) == [0, 1, 2]

    for checkpoint in ("cp", "cp-new"):   # with its Spark checkpoint, and starting from the table's offsets
        run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / checkpoint),
                               kafka_on_data_loss="skip"))
        assert sorted(rows_by_key(table.uri)) == [0, 1, 2, 6, 7]
    assert lost_of(table.uri) == [{topic: {"0": {"from": 3, "resumed_at": 6, "reason": "retention"}}}]
    assert json.loads(commits_extra(table.uri)[-1][OFFSETS_KEY]) == {topic: {"0": 8}}
    [moved] = list(tmp_path.glob("cp.lost-*"))   # its checkpoint named offsets Kafka lost: kept aside
    assert (moved / "offsets").is_dir()


def test_a_recreated_topic_is_read_from_its_start_when_told(spark, kafka_broker, tmp_path) -> None:
    from sparkjobs import batch_write

    topic = new_topic(kafka_broker, "recreated-skip", partitions=1)
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "first"} for i in range(5)])
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                         merge_mode="event_time")
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp")))
    recreate(kafka_broker.bootstrap_servers, topic)
    send_json(kafka_broker, topic, [{"id": i, "ts": 2, "v": "second"} for i in range(10, 12)])

    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), kafka_on_data_loss="skip"))
    assert {k: r["v"] for k, r in rows_by_key(table.uri).items()} == \
        {**{i: "first" for i in range(5)}, 10: "second", 11: "second"}
    [moved] = list(tmp_path.glob("cp.lost-*"))   # the stale checkpoint, kept
    assert (moved / "offsets").is_dir()
    assert lost_of(table.uri) == [{topic: {"0": {"from": 5, "resumed_at": 0, "reason": "recreated"}}}]

    send_json(kafka_broker, topic, [{"id": 12, "ts": 2, "v": "second"}])   # a batch writer goes on from there
    args = BatchWriteArgs(table=table.uri, kafka_bootstrap_servers=kafka_broker.bootstrap_servers,
                          kafka_topics=(topic,), extra={"writer": "w1"}, kafka_on_data_loss="skip")
    assert batch_write.main(args.to_argv()) == 0
    assert sorted(rows_by_key(table.uri)) == [*range(5), 10, 11, 12]
    assert len(lost_of(table.uri)) == 1   # nothing more was lost


def test_a_recreated_topic_longer_than_the_old_is_told_by_its_id(spark, kafka_broker, tmp_path) -> None:
    """A topic created again that already holds more messages than the offset the writer recorded gives no
    sign in its offsets: the writer used to go on at the recorded offset, silently skipping the new
    topic's first messages. Each commit now records the topics' ids beside the offsets; a new id is the
    bad input it is, with or without the Spark checkpoint, and with onDataLoss: skip the new topic is read
    from its start."""
    from sparkjobs import batch_write

    topic = new_topic(kafka_broker, "recreated-longer", partitions=1)
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "first"} for i in range(3)])
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                         merge_mode="event_time")
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp")))
    [ids] = [json.loads(e[TOPIC_IDS_KEY]) for e in commits_extra(table.uri) if TOPIC_IDS_KEY in e]
    assert list(ids) == [topic] and ids[topic]
    recreate(kafka_broker.bootstrap_servers, topic)
    send_json(kafka_broker, topic, [{"id": i, "ts": 2, "v": "second"} for i in range(10, 16)])  # offsets 0..5

    for checkpoint in ("cp", "cp-new"):
        with pytest.raises(KafkaDataLost, match=f"{topic} \\(id {ids[topic]}, now \\S+\\) were deleted and "
                                                "created again"):
            run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / checkpoint)))
    args = BatchWriteArgs(table=table.uri, kafka_bootstrap_servers=kafka_broker.bootstrap_servers,
                          kafka_topics=(topic,), extra={"writer": "w1"})
    assert batch_write.main(args.to_argv()) == EXIT_BAD_INPUT
    assert {k: r["v"] for k, r in rows_by_key(table.uri).items()} == {i: "first" for i in range(3)}

    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), kafka_on_data_loss="skip"))
    assert {k: r["v"] for k, r in rows_by_key(table.uri).items()} == \
        {**{i: "first" for i in range(3)}, **{i: "second" for i in range(10, 16)}}   # none skipped
    assert lost_of(table.uri) == [{topic: {"0": {"from": 3, "resumed_at": 0, "reason": "recreated"}}}]
    [moved] = list(tmp_path.glob("cp.lost-*"))   # the old topic's checkpoint, kept aside
    assert (moved / "offsets").is_dir()
    newest = json.loads(commits_extra(table.uri)[-1][TOPIC_IDS_KEY])
    assert newest[topic] != ids[topic]
