"""The test ZooKeeper starts, answers, stops by pid, and comes back on the same port with its data."""

from __future__ import annotations

from collections.abc import Callable

import psutil
import pytest
from kazoo.client import KazooClient

from tests.support.zookeeper import ZooKeeperServer, port_is_open

pytestmark = pytest.mark.zookeeper


def connect(server: ZooKeeperServer) -> KazooClient:
    client = KazooClient(hosts=server.connect_string, timeout=5.0)
    client.start(timeout=10)
    return client


def test_session_server_answers_four_letter_words_and_kazoo(zookeeper_server: ZooKeeperServer) -> None:
    assert zookeeper_server.four_letter_word("ruok") == "imok"
    assert "Mode: standalone" in zookeeper_server.four_letter_word("srvr")
    client = connect(zookeeper_server)
    try:
        client.create("/support/hello", b"world", makepath=True)
        assert client.get("/support/hello")[0] == b"world"
    finally:
        client.stop()
        client.close()


def test_stop_ends_the_process_and_closes_the_port(
    zookeeper_factory: Callable[[], ZooKeeperServer],
) -> None:
    server = zookeeper_factory()
    pid = server.pid
    assert pid is not None and psutil.pid_exists(pid)

    server.stop()

    assert not server.is_running
    assert not psutil.pid_exists(pid)
    assert not port_is_open(server.port)


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_restart_keeps_port_and_data(zookeeper_factory: Callable[[], ZooKeeperServer], kill: bool) -> None:
    server = zookeeper_factory()
    port = server.port
    client = connect(server)
    client.create("/support/kept", b"v1", makepath=True)
    client.stop()
    client.close()

    server.restart(kill=kill)

    assert server.port == port
    client = connect(server)
    try:
        assert client.get("/support/kept")[0] == b"v1"
    finally:
        client.stop()
        client.close()
