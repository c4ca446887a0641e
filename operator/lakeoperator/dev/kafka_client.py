"""The few Kafka client calls the demo and the tests make on a broker (through confluent-kafka, imported
when called: the `kafka` extra, also in the test extra, which `make deps` installs): create a topic, produce
messages. Must not start brokers (kafka.py) or read topics for the writers (sparkjobs.kafka does).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

Message = tuple[bytes | str | None, bytes | str | None]   # (key, value); a None value is a tombstone
# librdkafka's own lines (a broker just started answers "Coordinator load in progress: retrying" to the
# first idempotent producer, which retries) go to logging here, not to the demo's terminal: a failure
# that matters raises from produce or create_topic
LOG = logging.getLogger(__name__)
LOG.addHandler(logging.NullHandler())


def client_missing_reason() -> str | None:
    """Why this module cannot talk to a broker here, or None if it can."""
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "the Python Kafka client is not installed (pip install -e '.[kafka]' or `make deps`)"
    return None


def create_topic(bootstrap: str, name: str, *, partitions: int = 1) -> None:
    """Create `name` (one replica) and wait until the broker has it."""
    from confluent_kafka.admin import AdminClient, NewTopic

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": LOG}
    admin = AdminClient(config)
    for future in admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=30).values():
        future.result(timeout=60)


def new_producer(bootstrap: str) -> Any:
    """An idempotent producer whose librdkafka lines go to LOG."""
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
                     "logger": LOG})


def produce(bootstrap: str, topic: str, messages: Iterable[Message], *, partition: int | None = None) -> int:
    """Send `messages` to `topic` (to `partition`, else by key) and wait until each is acknowledged.
    Returns how many were sent."""
    from confluent_kafka import KafkaException

    producer = new_producer(bootstrap)
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
