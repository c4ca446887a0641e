"""Spark's Kafka reader waits for the brokers mid-run as long as the start's probe does (30 s per offset
fetch, unless the writer's options set `default.api.timeout.ms`): with the Kafka client's own 60 s and
Spark's three fetches, a broker stopped mid-run went unreported for 3m20s."""

from __future__ import annotations

from sparkjobs.contract import KafkaArgs
from sparkjobs.kafka.source import PROBE_TIMEOUT_S, probe_timeout_ms, reader_options

SOURCE = {"kafka_bootstrap_servers": "k:9092", "kafka_topics": ("t",)}


def test_the_reader_takes_the_probes_wait_unless_told() -> None:
    plain = reader_options(KafkaArgs(**SOURCE), "earliest", streaming=True)
    assert plain["kafka.default.api.timeout.ms"] == str(PROBE_TIMEOUT_S * 1000) == str(probe_timeout_ms(None))
    told = KafkaArgs(**SOURCE, kafka_options={"default.api.timeout.ms": "3000", "request.timeout.ms": "3000"})
    opts = reader_options(told, "earliest", streaming=False)
    assert opts["kafka.default.api.timeout.ms"] == "3000" == str(probe_timeout_ms("3000"))
    assert opts["kafka.request.timeout.ms"] == "3000"
