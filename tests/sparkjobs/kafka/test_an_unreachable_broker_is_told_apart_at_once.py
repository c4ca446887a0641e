"""A Kafka writer whose bootstrap addresses all refuse connections (no broker runs there) is told so at once
(SourceUnavailable naming the refusal), not after the client's 30-s metadata wait; an address that accepts
a connection but never answers as Kafka still gets the client's wait (here 2 s) and its own message. Either
way nothing is written."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pyarrow as pa
import pytest

from lakecore import Table
from sparkjobs.contract import StreamWriteArgs
from sparkjobs.kafka.source import SourceUnavailable, refused
from tests.sparkjobs.kafka.support import nothing_committed, run_stream
from tests.support.fixtures import require_spark_connectors

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


@pytest.fixture
def closed_port() -> int:
    """A port of 127.0.0.1 nobody listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port of 127.0.0.1 that accepts connections (the kernel's backlog) and never says a word."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


def args(table: Table, bootstrap: str, tmp_path, **options: str) -> StreamWriteArgs:
    return StreamWriteArgs(table=table.uri, kafka_bootstrap_servers=bootstrap, kafka_topics=("orders",),
                           kafka_options=dict(options), writer_id="w1",
                           checkpoint=str(tmp_path / "cp"), available_now=True)


def test_refused_tells_only_what_is_certain(closed_port, silent_port):
    assert refused(f"127.0.0.1:{closed_port}") == f"127.0.0.1:{closed_port}: connection refused"
    both = f"127.0.0.1:{closed_port}, PLAINTEXT://localhost:{closed_port}"
    assert refused(both) == (f"127.0.0.1:{closed_port}: connection refused; "
                             f"PLAINTEXT://localhost:{closed_port}: connection refused")
    assert refused(f"no-such-broker.invalid:{closed_port}") == \
        f"no-such-broker.invalid:{closed_port}: no such host"
    assert refused(f"127.0.0.1:{closed_port},127.0.0.1:{silent_port}") is None   # one accepts
    assert refused("not an address") is None    # the Kafka client's own error tells what is wrong


def told_unavailable(tmp_path, port: int, said: str, **options: str) -> None:
    """A writer of a new table from 127.0.0.1:`port` ends SourceUnavailable saying `said` (a regex with
    {bootstrap} for the address), having written nothing."""
    require_spark_connectors()
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    bootstrap = f"127.0.0.1:{port}"
    with pytest.raises(SourceUnavailable, match=said.format(bootstrap=bootstrap)):
        run_stream(args(table, bootstrap, tmp_path, **options))
    assert nothing_committed(table.uri)


@pytest.mark.spark
@pytest.mark.kafka
def test_a_broker_that_refuses_is_told_at_once(spark, tmp_path, closed_port):
    # no default.api.timeout.ms: the client's metadata wait would be the full 30 s
    told_unavailable(tmp_path, closed_port, r"no Kafka broker at {bootstrap} answered "
                                            r"\({bootstrap}: connection refused\); the writer retries")


@pytest.mark.spark
@pytest.mark.kafka
def test_an_address_that_accepts_but_never_answers_gets_the_clients_wait(spark, tmp_path, silent_port):
    told_unavailable(tmp_path, silent_port, r"no Kafka broker at {bootstrap} answered within 2 s",
                     **{"default.api.timeout.ms": "2000", "request.timeout.ms": "2000"})
