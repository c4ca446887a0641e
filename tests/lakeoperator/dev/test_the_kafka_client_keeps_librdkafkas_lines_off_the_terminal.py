"""The demo's Kafka client (lakeoperator.dev.kafka_client) sends librdkafka's own lines to logging, not to
the terminal: a broker that has just started answers the demo's first idempotent producer "Coordinator load
in progress: retrying", which librdkafka printed among the demo's progress as `%4|...|GETPID|...`. A
producer whose broker refuses connections makes the same kind of line at once, every time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lakeoperator.dev.kafka_client import client_missing_reason
from lakeoperator.dev.zookeeper import free_port
from tests.support.fixtures import require

ROOT = Path(__file__).resolve().parents[3]
PRODUCE_TO_NOWHERE = """
import sys, time
from lakeoperator.dev.kafka_client import new_producer
producer = new_producer(sys.argv[1])
producer.produce("t", b"v")
deadline = time.monotonic() + 2
while time.monotonic() < deadline:
    producer.poll(0.1)   # librdkafka's lines are delivered while polling
producer.purge()
print("polled")
"""


def test_a_producer_whose_broker_refuses_prints_nothing_of_its_own() -> None:
    require("The Python Kafka client", client_missing_reason())
    nowhere = f"127.0.0.1:{free_port()}"   # nothing listens there: every connection is refused
    done = subprocess.run([sys.executable, "-c", PRODUCE_TO_NOWHERE, nowhere], capture_output=True, text=True,
                          timeout=60, check=False, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "polled", done.stdout + done.stderr
    assert done.stderr == "", done.stderr
