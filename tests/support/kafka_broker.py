"""A real Apache Kafka broker for tests (the developer tools' launcher, lakeoperator.dev.kafka, which the
demo uses too), and the small client calls tests make on it through confluent-kafka: create topics, produce
messages, read a topic's end offsets."""

from __future__ import annotations

from lakeoperator.dev.kafka import KafkaBroker, kafka_libs, kafka_missing_reason, kafka_version
from lakeoperator.dev.kafka_client import Message, create_topic, produce

__all__ = ["KafkaBroker", "Message", "create_topic", "end_offsets", "kafka_libs", "kafka_missing_reason",
           "kafka_version", "produce"]


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
