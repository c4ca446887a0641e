"""The test Kafka broker starts in KRaft mode, takes and serves messages, stops by pid, and comes back on the
same port with its topics and messages."""

from __future__ import annotations

from collections.abc import Callable

import psutil
import pytest
from confluent_kafka import Consumer

from tests.support.kafka_broker import KafkaBroker, create_topic, end_offsets, produce
from tests.support.zookeeper import port_is_open

pytestmark = pytest.mark.kafka


def consume_all(bootstrap: str, topic: str, expected: int) -> list[tuple[bytes | None, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out: list[tuple[bytes | None, bytes | None]] = []
    try:
        for _ in range(120):
            if len(out) >= expected:
                break
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                assert message.error() is None, message.error()
                out.append((message.key(), message.value()))
    finally:
        consumer.close()
    return out


def test_the_session_broker_takes_and_serves_messages(kafka_broker: KafkaBroker) -> None:
    create_topic(kafka_broker.bootstrap_servers, "support-hello", partitions=2)
    sent = produce(kafka_broker.bootstrap_servers, "support-hello",
                   [(f"k{i}", f"v{i}") for i in range(100)])

    assert sent == 100
    assert sum(end_offsets(kafka_broker.bootstrap_servers, "support-hello").values()) == 100
    got = consume_all(kafka_broker.bootstrap_servers, "support-hello", 100)
    assert sorted(v or b"" for _, v in got) == sorted(f"v{i}".encode() for i in range(100))
    assert kafka_broker.startup_seconds is not None


def test_stop_ends_the_process_and_a_restart_keeps_port_and_messages(
        kafka_factory: Callable[[], KafkaBroker]) -> None:
    broker = kafka_factory()
    port, pid = broker.port, broker.pid
    create_topic(broker.bootstrap_servers, "kept")
    produce(broker.bootstrap_servers, "kept", [(b"k", b"before")])

    broker.stop(kill=True)

    assert pid is not None and not psutil.pid_exists(pid)
    assert not port_is_open(port)
    broker.start()
    assert broker.port == port
    produce(broker.bootstrap_servers, "kept", [(b"k", b"after")])
    assert [v for _, v in consume_all(broker.bootstrap_servers, "kept", 2)] == [b"before", b"after"]
