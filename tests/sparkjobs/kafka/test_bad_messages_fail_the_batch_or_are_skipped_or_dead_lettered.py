"""Messages that do not decode are never dropped silently: by default the batch fails, naming the first bad
message's topic/partition@offset, and nothing of it is written; `skip` writes the good ones and counts the
bad in the commit; `deadLetter` puts them in a topic (raw, with where they came from and why) or a Weir
table keyed by topic, partition and offset, then writes the good ones."""

from __future__ import annotations

import json
import logging

import pyarrow as pa
import pytest
from confluent_kafka import Consumer

from lakecore import Table
from sparkjobs.kafka.bad_records import DEAD_LETTERED_KEY, FIRST_BAD_KEY, SKIPPED_KEY, BadMessages
from sparkjobs.kafka.offsets import OFFSETS_KEY, decode
from tests.sparkjobs.kafka.support import (
    commits_extra,
    new_topic,
    nothing_committed,
    rows_by_key,
    run_stream,
    stream_args,
)
from tests.support.fixtures import require_spark_connectors
from tests.support.kafka_broker import produce

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("v", pa.string())])


@pytest.fixture(autouse=True)
def _connectors() -> None:
    require_spark_connectors()


def mixed(broker, topic) -> None:
    """Partition 0: five good messages, then at offset 5 one that is not JSON, then one without its key."""
    good = [(str(i), json.dumps({"id": i, "ts": 1, "v": "ok"})) for i in range(5)]
    produce(broker.bootstrap_servers, topic, [*good, ("x", "{not json"), ("y", json.dumps({"ts": 1}))],
            partition=0)


def table_at(tmp_path) -> Table:
    return Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1)


def test_by_default_the_batch_fails_naming_the_first_bad_message(spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "bad-fail", partitions=1)
    mixed(kafka_broker, topic)
    table = table_at(tmp_path)
    said = rf"message {topic}/0@5 does not decode \(not a JSON object.*2 of the batch's 7 messages are bad"
    with pytest.raises(BadMessages, match=said + ".*nothing of the batch was committed"):
        run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp")))
    assert nothing_committed(table.uri)


def test_skip_writes_the_good_ones_and_counts_the_bad_in_the_commit(spark, kafka_broker, tmp_path, caplog):
    """The count alone was in the commit: no log line said messages were skipped, nor which. The first
    one is named in the commit and in a warning of the driver's log."""
    topic = new_topic(kafka_broker, "bad-skip", partitions=1)
    mixed(kafka_broker, topic)
    table = table_at(tmp_path)
    with caplog.at_level(logging.WARNING, logger="sparkjobs.kafka.bad_records"):
        run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), bad_records="skip"))
    assert sorted(rows_by_key(table.uri)) == list(range(5))
    extra = commits_extra(table.uri)[-1]
    assert extra[SKIPPED_KEY] == "2" and decode(extra[OFFSETS_KEY]) == {topic: {0: 7}}
    assert extra[FIRST_BAD_KEY].startswith(f"{topic}/0@5: not a JSON object"), extra
    said = [r.getMessage() for r in caplog.records if r.name == "sparkjobs.kafka.bad_records"]
    assert any(f"2 of the batch's 7 Kafka messages are bad (skipped): the first, {topic}/0@5" in s
               for s in said), said


def test_dead_letters_go_to_a_topic_with_where_they_came_from(spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "bad-dlq", partitions=1)
    dead = new_topic(kafka_broker, "dlq", partitions=1)
    mixed(kafka_broker, topic)
    table = table_at(tmp_path)
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), bad_records="deadLetter",
                           dead_letter_topic=dead))
    assert sorted(rows_by_key(table.uri)) == list(range(5))
    assert commits_extra(table.uri)[-1][DEAD_LETTERED_KEY] == "2"
    consumer = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "dlq-check",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([dead])
    got = []
    for _ in range(60):
        got += [m for m in consumer.consume(10, timeout=0.5) if m.error() is None]
        if len(got) >= 2:
            break
    consumer.close()
    assert [m.value() for m in got] == [b"{not json", json.dumps({"ts": 1}).encode()]
    headers = dict(got[0].headers() or [])
    assert headers["weir.source"] == f"{topic}/0@5".encode() and b"not a JSON object" in headers["weir.error"]


def test_dead_letters_go_to_a_table_keyed_by_topic_partition_and_offset(spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "bad-dlt", partitions=1)
    mixed(kafka_broker, topic)
    table, dead = table_at(tmp_path), str(tmp_path / "dead")
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), bad_records="deadLetter",
                           dead_letter_table=dead))
    rows = sorted(Table.open(dead).read().to_pylist(), key=lambda r: r["offset"])
    assert [(r["topic"], r["partition"], r["offset"]) for r in rows] == [(topic, 0, 5), (topic, 0, 6)]
    assert "record key" in rows[1]["error"] and rows[0]["writer"] == "w1"
    assert sorted(rows_by_key(table.uri)) == list(range(5))


def spread(kafka_broker, topic) -> dict[int, list[int]]:
    """Three partitions of good messages (keys 0..299) with bad ones among them, whose keys (or lack of one)
    send them to different write tasks of a 4-bucket table: partition -> the offsets of its bad messages."""
    bad_at: dict[int, list[int]] = {}
    for partition in range(3):
        messages, bad_at[partition] = [], []
        for i in range(100):
            key = partition * 100 + i
            if partition and i in (7, 41, 93):
                bad_at[partition].append(len(messages))
                messages.append((str(key), json.dumps({"id": key, "ts": "not a number"}) if i == 41
                                 else "{not json"))
            messages.append((str(key), json.dumps({"id": key, "ts": 1, "v": f"p{partition}"})))
        produce(kafka_broker.bootstrap_servers, topic, messages, partition=partition)
    return bad_at


def spread_table(tmp_path) -> Table:
    return Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=4)


def test_bad_messages_across_the_writes_tasks_are_counted_once_and_offsets_are_each_partitions_last(
        spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "bad-spread", partitions=3)
    bad_at = spread(kafka_broker, topic)
    table = spread_table(tmp_path)
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), bad_records="skip"))
    assert sorted(rows_by_key(table.uri)) == list(range(300))
    extra = commits_extra(table.uri)[-1]
    assert extra[SKIPPED_KEY] == str(sum(len(o) for o in bad_at.values())) == "6"
    assert decode(extra[OFFSETS_KEY]) == {topic: {0: 100, 1: 103, 2: 103}}


def test_a_failed_batch_names_its_lowest_bad_message_and_leaves_no_file(spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "bad-spread-fail", partitions=3)
    bad_at = spread(kafka_broker, topic)
    table = spread_table(tmp_path)
    said = rf"message {topic}/1@{bad_at[1][0]} does not decode .*6 of the batch's 306 messages are bad"
    with pytest.raises(BadMessages, match=said):
        run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp")))
    assert nothing_committed(table.uri)
    written = [p for p in (tmp_path / "t").rglob("*") if p.is_file() and ".weir" not in p.parts]
    assert not written, written     # what the write's tasks wrote was rolled back


def test_a_misspelt_field_is_a_bad_message_not_a_null_column(spark, kafka_broker, tmp_path):
    """`{"id": 9, "ts": 2, "vv": "x"}` was written as id 9 with a null `v` and no word (the file writers
    refuse such a field). A field that is no column but within an edit or two of a column the message
    lacks is now a bad message naming both; a field far from every column is ignored as before."""
    topic = new_topic(kafka_broker, "bad-misspelt", partitions=1)
    produce(kafka_broker.bootstrap_servers, topic,
            [("8", json.dumps({"id": 8, "ts": 1, "v": "ok", "vv": "both"})),
             ("9", json.dumps({"id": 9, "ts": 1, "V ": "x"})),
             ("10", json.dumps({"id": 10, "ts": 1, "producer": "y"}))], partition=0)
    table = table_at(tmp_path)
    run_stream(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), bad_records="skip"))
    rows = rows_by_key(table.uri)
    assert sorted(rows) == [8, 10] and rows[8]["v"] == "ok" and rows[10]["v"] is None, rows
    extra = commits_extra(table.uri)[-1]
    assert extra[SKIPPED_KEY] == "1", extra
    assert extra[FIRST_BAD_KEY] == (f"{topic}/0@1: field 'V ' is no column; did you mean 'v'? (else v would "
                                    "be written as null)"), extra
