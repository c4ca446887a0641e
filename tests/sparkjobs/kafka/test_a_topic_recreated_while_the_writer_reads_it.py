"""A topic deleted and created again while a streaming writer reads it. Spark's Kafka source reads on
at the offset it had reached, now in the new topic: when the new topic already holds more messages than
that offset nothing tells it (not even with failOnDataLoss), and the writer committed the new topic's
messages from there on, silently skipping the ones before (here rows 10..12 of 10..15). The writer now
asks Kafka for the topics' ids before each commit: a changed id rolls the micro-batch back; it is
KafkaDataLost (the default), or, with `onDataLoss: skip`, the writer starts again at once and reads the
new topic from its start (the lost offsets recorded, the old checkpoint kept aside)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import Table
from sparkjobs.contract import EXIT_BAD_INPUT, EXIT_OK, BatchWriteArgs, StreamWriteArgs
from sparkjobs.kafka.offsets import LOST_KEY, TOPIC_IDS_KEY
from sparkjobs.kafka.source import KafkaDataLost
from sparkjobs.stream import COMMITTED_PAUSE_ENV
from tests.sparkjobs.kafka.support import (
    commits_extra,
    new_topic,
    rows_by_key,
    run_stream,
    send_json,
    stream_args,
)
from tests.sparkjobs.kafka.test_a_topic_that_lost_unread_messages_is_bad_input import delete_unread, recreate
from tests.support.fixtures import require_spark_connectors

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("v", pa.string())])


@pytest.fixture(autouse=True)
def _connectors() -> None:
    require_spark_connectors()


class Running:
    """The streaming job's run() on a thread of this process (the session's Spark), until it ends or is
    stopped."""

    def __init__(self, args: Any) -> None:
        self.out: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, args=(args,), daemon=True)
        self.thread.start()

    def _run(self, args: Any) -> None:
        try:
            self.out["result"] = run_stream(args)
        except BaseException as exc:   # what the job's entry point would map to an exit code
            self.out["error"] = exc

    def stop(self, spark: Any, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while self.thread.is_alive() and time.monotonic() < deadline:
            for query in spark.streams.active:
                query.stop()
            self.thread.join(0.5)
        assert not self.thread.is_alive(), "the streaming job did not stop"


def wait_for(reached: Path, job: Running, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not reached.exists():
        assert job.thread.is_alive(), f"the job ended before {reached.name}: {job.out}"
        assert time.monotonic() < deadline, f"the job never reached {reached.name}"
        time.sleep(0.1)


def recreated_while_reading(spark, kafka_broker, tmp_path, monkeypatch, prefix: str,
                            **kw: Any) -> tuple[Table, str, str, Running]:
    """A writer that committed offsets 0..2 of the topic, held after that commit while the topic is
    deleted and created again with six messages (ids 10..15, offsets 0..5), then let go: its next
    micro-batch reads the new topic from offset 3 on."""
    topic = new_topic(kafka_broker, prefix, partitions=1)
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "first"} for i in range(3)])
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                         merge_mode="event_time")
    pause = tmp_path / "pause"
    pause.mkdir()
    (pause / "hold").touch()
    monkeypatch.setenv(COMMITTED_PAUSE_ENV, str(pause))
    job = Running(stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), available_now=False, **kw))
    wait_for(pause / "reached-batch-0", job)
    [ids] = [json.loads(e[TOPIC_IDS_KEY]) for e in commits_extra(table.uri)]
    recreate(kafka_broker.bootstrap_servers, topic)
    send_json(kafka_broker, topic, [{"id": i, "ts": 2, "v": "second"} for i in range(10, 16)])
    (pause / "hold").unlink()
    return table, topic, ids[topic], job


def rows_once(table: Table, want: set[int], job: Running, timeout_s: float = 120) -> None:
    """Wait until the table holds at least the keys `want` (or the job ended)."""
    deadline = time.monotonic() + timeout_s
    while job.thread.is_alive() and time.monotonic() < deadline:
        if want <= set(rows_by_key(table.uri)):
            return
        time.sleep(0.5)


def test_a_topic_recreated_mid_stream_fails_the_batch_by_default(spark, kafka_broker, tmp_path,
                                                                 monkeypatch) -> None:
    table, topic, old_id, job = recreated_while_reading(spark, kafka_broker, tmp_path, monkeypatch,
                                                        "midstream-fail")
    rows_once(table, {13}, job)   # the old code committed 13..15 and read on
    job.stop(spark)
    assert isinstance(job.out.get("error"), KafkaDataLost), job.out
    assert f"{topic} (id {old_id}, now " in str(job.out["error"])
    assert "while this writer was reading" in str(job.out["error"])
    assert {k: r["v"] for k, r in rows_by_key(table.uri).items()} == {i: "first" for i in range(3)}


def test_a_topic_recreated_mid_stream_is_read_from_its_start_when_told(spark, kafka_broker, tmp_path,
                                                                       monkeypatch) -> None:
    table, topic, old_id, job = recreated_while_reading(spark, kafka_broker, tmp_path, monkeypatch,
                                                        "midstream-skip", kafka_on_data_loss="skip")
    rows_once(table, set(range(10, 16)), job)
    job.stop(spark)
    assert "error" not in job.out, job.out
    assert {k: r["v"] for k, r in rows_by_key(table.uri).items()} == \
        {**{i: "first" for i in range(3)}, **{i: "second" for i in range(10, 16)}}   # none skipped
    lost = [json.loads(e[LOST_KEY]) for e in commits_extra(table.uri) if LOST_KEY in e]
    assert lost == [{topic: {"0": {"from": 3, "resumed_at": 0, "reason": "recreated"}}}]
    newest = json.loads(commits_extra(table.uri)[-1][TOPIC_IDS_KEY])
    assert newest[topic] != old_id
    [moved] = list(tmp_path.glob("cp.lost-*"))   # the old topic's checkpoint, kept aside
    assert (moved / "offsets").is_dir()
    t = Table.open(table.uri)
    records = [t.commit_metadata(i).records for i in t.timeline().completed if i.action != "rollback"]
    assert sum(records) == 9, records   # nothing of the new topic written twice


def recreated_at_the_first_check(monkeypatch, broker, topic: str, ids: range,
                                 after: threading.Event | None = None) -> list[tuple]:
    """The topic deleted and created again (holding messages of `ids`, ts 2, "second") right before the
    job's first check of the topics' ids (the first once `after` is set): between its tasks' read and
    its commit. The checks' arguments."""
    from sparkjobs.kafka import batch

    real, calls = batch.check_same_topics, []

    def recreated_first(*a: Any) -> None:
        if after is not None and not after.is_set():
            return real(*a)
        if not calls:
            recreate(broker.bootstrap_servers, topic)
            send_json(broker, topic, [{"id": i, "ts": 2, "v": "second"} for i in ids])
        calls.append(a)
        real(*a)

    monkeypatch.setattr(batch, "check_same_topics", recreated_first)
    return calls


@pytest.mark.parametrize("on_loss", ["fail", "skip"])
def test_a_batch_write_of_a_topic_recreated_after_its_read_is_not_committed(spark, kafka_broker, tmp_path,
                                                                            monkeypatch, capsys,
                                                                            on_loss) -> None:
    """A batch writer asks the same before its commit: the topic deleted and created again after its tasks
    read it (and wrote their files) rolls the write back; with skip it starts again at once and reads the
    new topic from its start."""
    from sparkjobs import batch_write

    topic = new_topic(kafka_broker, f"batch-{on_loss}", partitions=1)
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "first"} for i in range(3)])
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                         merge_mode="event_time")
    args = BatchWriteArgs(table=table.uri, kafka_bootstrap_servers=kafka_broker.bootstrap_servers,
                          kafka_topics=(topic,), extra={"writer": "w1"}, kafka_on_data_loss=on_loss)
    assert batch_write.main(args.to_argv()) == EXIT_OK
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "unread"} for i in (3, 4)])
    calls = recreated_at_the_first_check(monkeypatch, kafka_broker, topic, range(10, 16))
    capsys.readouterr()
    code = batch_write.main(args.to_argv())
    said = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = {k: r["v"] for k, r in rows_by_key(table.uri).items()}
    if on_loss == "fail":
        assert code == EXIT_BAD_INPUT and "were deleted and created again while this writer" in said["error"]
        assert rows == {i: "first" for i in range(3)}
        return
    assert code == EXIT_OK, said
    assert rows == {**{i: "first" for i in range(3)}, **{i: "second" for i in range(10, 16)}}
    lost = [json.loads(e[LOST_KEY]) for e in commits_extra(table.uri) if LOST_KEY in e]
    assert lost == [{topic: {"0": {"from": 3, "resumed_at": 0, "reason": "recreated"}}}]
    assert len(calls) == 2


def test_a_topic_recreated_in_the_first_micro_batch_is_read_from_its_start(spark, kafka_broker, tmp_path,
                                                                           monkeypatch) -> None:
    """The writer had committed nothing (no recorded offsets or ids to tell the recreation by at the
    restart): the restart is told which topic was created again, so the Spark checkpoint that planned the
    old topic's offsets 3..6 (retention had deleted 0..2) is moved aside and the new topic read from its
    start. With that checkpoint kept, the restart read the new topic's offsets 3..5 only (ids 13..15):
    10..12 were skipped."""
    topic = new_topic(kafka_broker, "first-batch", partitions=1)
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "first"} for i in range(6)])
    delete_unread(kafka_broker.bootstrap_servers, topic, 3)
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                         merge_mode="event_time")
    recreated_at_the_first_check(monkeypatch, kafka_broker, topic, range(10, 16))
    args = stream_args(table, kafka_broker, topic, str(tmp_path / "cp"), kafka_on_data_loss="skip")
    run_stream(args)
    assert {k: r["v"] for k, r in rows_by_key(table.uri).items()} == {i: "second" for i in range(10, 16)}
    [moved] = list(tmp_path.glob("cp.lost-*"))   # the old topic's checkpoint, kept aside
    assert (moved / "offsets").is_dir()

    send_json(kafka_broker, topic, [{"id": i, "ts": 2, "v": "second"} for i in range(16, 19)])  # offsets 6..8
    run_stream(args)   # goes on from what the restart committed, the new id recorded: nothing read again
    assert sorted(rows_by_key(table.uri)) == list(range(10, 19))
    t = Table.open(table.uri)
    assert sum(t.commit_metadata(i).records for i in t.timeline().completed if i.action != "rollback") == 9


def test_the_other_topics_of_a_restart_go_on_where_the_first_query_began(spark, kafka_broker, tmp_path,
                                                                         monkeypatch) -> None:
    """A writer of two topics starting at `latest` that has read nothing of the other topic when one is
    created again: its restart starts the other topic where the first query began, not at a later latest
    (the old restart started it at the latest offsets again: the messages of the micro-batch rolled back,
    ids 100..102, were never read)."""
    recreated_topic = new_topic(kafka_broker, "several-a", partitions=1)
    other = new_topic(kafka_broker, "several-b", partitions=1)
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                         merge_mode="event_time")
    sent = threading.Event()
    recreated_at_the_first_check(monkeypatch, kafka_broker, recreated_topic, range(10, 13), after=sent)
    args = StreamWriteArgs(table=table.uri, kafka_bootstrap_servers=kafka_broker.bootstrap_servers,
                           kafka_topics=(recreated_topic, other), writer_id="w1",
                           checkpoint=str(tmp_path / "cp"), kafka_starting_offsets="latest",
                           kafka_on_data_loss="skip")
    job = Running(args)
    deadline = time.monotonic() + 120
    while not [q for q in spark.streams.active if q.lastProgress is not None]:   # its latest is taken
        assert job.thread.is_alive(), job.out
        assert time.monotonic() < deadline, "the query never reported progress"
        time.sleep(0.2)
    sent.set()   # the micro-batch that reads what follows (no batch runs without data) sees A recreated
    send_json(kafka_broker, other, [{"id": i, "ts": 1, "v": "other"} for i in range(100, 103)])
    rows_once(table, {10, 11, 12, 100, 101, 102}, job)
    job.stop(spark)
    assert "error" not in job.out, job.out
    assert {k: r["v"] for k, r in rows_by_key(table.uri).items()} == \
        {**{i: "second" for i in range(10, 13)}, **{i: "other" for i in range(100, 103)}}
