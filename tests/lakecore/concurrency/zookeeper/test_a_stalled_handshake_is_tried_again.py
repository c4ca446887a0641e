"""A connection attempt that ZooKeeper accepts and never answers costs HANDSHAKE_TIMEOUT_S, not the
whole session timeout: the client tries again and is connected well within the connection timeout.

Forced interleaving, on the real ZooKeeper behind a TCP proxy (tests/support/tcp_faults.py): a
connected client loses its connection (the proxy cuts it, as a server restart does) and its next
connection attempt lands on a socket that is accepted and never read, which ZooKeeper 3.8 itself
now and then does with a connection accepted as it starts (found in CI: a writer right after a
ZooKeeper restart failed with "cannot reach ZooKeeper ... within 15.0s", its client waiting kazoo's
30-s handshake read). Before, the reconnection waited the session timeout (30 s) and `client()`
gave up at the connection timeout (15 s) with LockUnavailable; now it is connected a few seconds
later, in the same session (its ephemeral node is still there)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from lakecore.concurrency.zookeeper import Endpoint, ZooKeeperClients
from lakecore.concurrency.zookeeper.clients import HANDSHAKE_TIMEOUT_S
from tests.support.tcp_faults import StallingProxy

pytestmark = [pytest.mark.zookeeper]


def test_a_stalled_handshake_is_tried_again(zookeeper_server: Any) -> None:
    clients = ZooKeeperClients()
    with StallingProxy(zookeeper_server.port) as proxy:
        endpoint = Endpoint(proxy.connect_string, session_timeout_s=30.0, connection_timeout_s=15.0)
        try:
            client = clients.client(endpoint)
            node = client.create("/weir-stall-test-", b"", ephemeral=True, sequence=True)
            session = client.client_id

            proxy.stall_next(1)
            proxy.cut()                       # the next attempt lands on the stalled socket
            started = time.monotonic()
            while proxy.stalled < 1:          # kazoo saw the cut and made that attempt
                assert time.monotonic() - started < 10, "no connection attempt after the cut"
                time.sleep(0.02)
            again = clients.client(endpoint)  # LockUnavailable after 15 s before
            waited = time.monotonic() - started
            assert again is client and client.client_id == session
            assert waited < HANDSHAKE_TIMEOUT_S + 5, waited
            assert client.exists(node) is not None   # the session, and its ephemeral node, lived on
        finally:
            clients.close()
