"""What the Kafka writer tests share: a topic of their own on the session broker, the job arguments of a
Kafka writer, running the streaming job in this process (on the session's Spark) until the topic is
drained, and reading a table as {key: row}."""

from __future__ import annotations

import json
import uuid
from typing import Any

from lakecore import Table
from sparkjobs.contract import StreamWriteArgs
from tests.support.kafka_broker import KafkaBroker, create_topic, produce


def new_topic(broker: KafkaBroker, prefix: str, *, partitions: int = 2) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, name, partitions=partitions)
    return name


def send_json(broker: KafkaBroker, topic: str, rows: list[dict[str, Any]], key: str = "id") -> None:
    produce(broker.bootstrap_servers, topic, [(str(r.get(key)), json.dumps(r)) for r in rows])


def stream_args(table: Table, broker: KafkaBroker, topic: str, checkpoint: str, **kw: Any) -> StreamWriteArgs:
    return StreamWriteArgs(table=table.uri, kafka_bootstrap_servers=broker.bootstrap_servers,
                           kafka_topics=(topic,), writer_id=kw.pop("writer_id", "w1"), checkpoint=checkpoint,
                           available_now=kw.pop("available_now", True), **kw)


def run_stream(args: StreamWriteArgs) -> dict[str, Any]:
    """The streaming job's run() in this process, on the session's Spark (available now: until drained)."""
    from sparkjobs.stream_write import run

    return run(args)


def rows_by_key(uri: str, key: str = "id") -> dict[Any, dict[str, Any]]:
    return {r[key]: r for r in Table.open(uri).read().to_pylist()}


def nothing_committed(uri: str) -> bool:
    """No write of the table completed (a failed one may have left its rollback) and it reads empty."""
    t = Table.open(uri)
    return not [i for i in t.timeline().completed if i.action != "rollback"] and t.read().num_rows == 0


def commits_extra(uri: str) -> list[dict[str, Any]]:
    t = Table.open(uri)
    return [dict(t.commit_metadata(i).extra) for i in t.timeline().completed]
