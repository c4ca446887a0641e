"""`weir kafka`: a Kafka broker on this machine and a way to send it JSON lines, to try a LakeWriter of
Kafka topics with `weir run` before pointing it at the real cluster (examples/kafka). Not for production:
one broker, one replica, data in a throw-away directory.

    weir kafka broker [--port 9092] [--dir DIR]     # runs until Ctrl-C
    weir kafka produce TOPIC FILE [--key FIELD]     # each line of FILE (- for stdin) is one message

Builds on kafka.py (the broker the demo and the tests start) and kafka_client.py (topics, producing).
"""

from __future__ import annotations

import json
import logging
import shutil
import signal
import socket
import sys
import tempfile
import threading
from pathlib import Path
from typing import Annotated, Any

import typer

from lakecore.cli.consoles import say
from lakecore.cli.errors import CommandError
from lakecore.cli.main import friendly

kafka_app = typer.Typer(help="A Kafka broker on this machine, and JSON lines sent to it: to try Kafka "
                             "writers with `weir run` (one broker, not for production).",
                        no_args_is_help=True)


@kafka_app.command("broker")
@friendly
def broker(port: Annotated[int, typer.Option(help="Its port on 127.0.0.1.")] = 9092,
           directory: Annotated[str | None, typer.Option("--dir", help="Where its data and log go (default: "
                                                         "a temporary directory, removed when it stops; "
                                                         "one given is kept, and must be empty).")] = None,
           ) -> None:
    """Run a single-node Kafka broker (KRaft) on 127.0.0.1 until Ctrl-C."""
    from lakeoperator.dev.kafka import KafkaBroker, kafka_missing_reason

    reason = kafka_missing_reason()
    if reason is not None:
        raise CommandError(f"cannot start Kafka here: {reason}")
    if _in_use(port):
        raise CommandError(f"port {port} on 127.0.0.1 is in use (another broker?); give another with --port")
    work = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="weir-kafka-"))
    if directory and work.exists() and any(work.iterdir()):
        raise CommandError(f"{work} is not empty: give an empty or new directory (a broker's data starts "
                           "afresh each time)")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    server = KafkaBroker(work)
    server.port = port
    try:
        try:
            server.start()
        except (RuntimeError, OSError) as exc:   # it did not come up in time, or Java could not start
            raise CommandError(f"the broker did not start: {exc}; its log ends:\n"
                               f"{server.log_tail()}") from None
        say(f"Kafka broker at {server.bootstrap_servers} (log: {server.log_path}); Ctrl-C stops it.\n"
            f"A LakeWriter reads it with source.kafka.bootstrapServers: {server.bootstrap_servers} "
            "(examples/kafka); send it JSON lines with `weir kafka produce TOPIC FILE`.")
        while not stop.wait(1.0):
            if not server.is_running:
                raise CommandError(f"the broker stopped by itself; its log ends:\n{server.log_tail()}")
    finally:
        server.stop()
        if not directory:
            shutil.rmtree(work, ignore_errors=True)
    say("stopped the broker")


@kafka_app.command("produce")
@friendly
def produce(topic: Annotated[str, typer.Argument(help="Topic (created with --partitions when missing).")],
            file: Annotated[str, typer.Argument(help="JSON lines, one message each (- for standard input).")],
            bootstrap: Annotated[str, typer.Option(help="The broker's host:port.")] = "127.0.0.1:9092",
            key: Annotated[str | None, typer.Option(help="Field whose value is each message's key (a "
                                                         "record key: a key's messages stay in order).")]
            = None,
            partitions: Annotated[int, typer.Option(help="Partitions of a topic created here.")] = 1) -> None:
    """Send each line of FILE to TOPIC as one message, as it is (empty lines skipped)."""
    from lakeoperator.dev.kafka_client import client_missing_reason
    from lakeoperator.dev.kafka_client import produce as send

    reason = client_missing_reason()
    if reason is not None:
        raise CommandError(reason)
    # librdkafka's retries (a new broker's "Coordinator load in progress") are no news: an error raises
    logging.getLogger("lakeoperator.dev.kafka_client").propagate = False
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text()
    except OSError as exc:
        raise CommandError(f"cannot read {file}: {exc.strerror or exc}") from None
    lines = [line for line in text.splitlines() if line.strip()]
    messages = [(_key(line, key, n), line) for n, line in enumerate(lines, 1)]
    if not any(_answers(server) for server in bootstrap.split(",")):   # at once, not after the client's wait
        raise CommandError(f"no broker answers at {bootstrap}; is one running there (`weir kafka broker`)?")
    try:
        _ensure_topic(bootstrap, topic, partitions)
        sent = send(bootstrap, topic, messages)
    except Exception as exc:   # the client's own errors: unreachable broker, refused topic, ...
        raise CommandError(f"could not send to {topic} at {bootstrap}: {exc}; is a broker running there "
                           "(`weir kafka broker`)?") from None
    say(f"sent {sent} message(s) to {topic} at {bootstrap}")


def _key(line: str, field: str | None, number: int) -> str | None:
    if field is None:
        return None
    try:
        value = json.loads(line).get(field)
    except (ValueError, AttributeError):
        return None   # a bad message has no key: it is sent all the same
    if value is None:
        raise CommandError(f"line {number} has no {field!r} for its key: {line[:80]}")
    return str(value)


def _ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient

    from lakeoperator.dev.kafka_client import LOG, create_topic

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": LOG}
    listed = AdminClient(config).list_topics(timeout=10)
    if topic not in listed.topics:
        create_topic(bootstrap, topic, partitions=partitions)


def _answers(server: str) -> bool:
    """Whether host:port takes a TCP connection within 3 s."""
    host, _, port = server.strip().rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=3):
            return True
    except (OSError, ValueError):
        return False


def _in_use(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


__all__ = ["kafka_app"]
