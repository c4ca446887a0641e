"""A real Apache Kafka broker for tests (the developer tools' launcher, lakeoperator.dev.kafka, which the
demo uses too), and the small client calls tests make on it through confluent-kafka: create topics, produce
messages, read a topic's end offsets."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lakeoperator.dev.kafka import KafkaBroker, kafka_libs, kafka_missing_reason, kafka_version

__all__ = ["KafkaBroker", "create_topic", "end_offsets", "kafka_libs", "kafka_missing_reason",
           "kafka_version", "produce"]

Message = tuple[bytes | str | None, bytes | str | None]   # (key, value); a None value is a tombstone


def create_topic(bootstrap: str, name: str, *, partitions: int = 1) -> None:
    """Create `name` (one replica) and wait until the broker has it."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30).values():
        future.result(timeout=60)


def produce(bootstrap: str, topic: str, messages: Iterable[Message], *, partition: int | None = None) -> int:
    """Send `messages` to `topic` (to `partition`, else by key) and wait until each is acknowledged.
    Returns how many were sent."""
    from confluent_kafka import KafkaException, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    failures: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    sent = 0
    for key, value in messages:
        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        while True:
            try:
                producer.produce(topic, key=key, value=value, on_delivery=delivered, **extra)
                break
            except BufferError:   # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        sent += 1
    if producer.flush(60) or failures:
        raise KafkaException(failures[0] if failures else "messages still queued after 60 s")
    return sent


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> the offset the next message will get."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "weir-tests-offsets"})
    try:
        metadata = consumer.list_topics(topic, timeout=30).topics[topic]
        out = {}
        for p in metadata.partitions:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            out[p] = high
        return out
    finally:
        consumer.close()
