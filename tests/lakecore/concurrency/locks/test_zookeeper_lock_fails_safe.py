"""The ZooKeeper lock fails safe: unreachable servers, killed holders and stopped servers never leave a
writer believing it holds a lock it lost, and never hang it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("kazoo")

from hypothesis import given
from hypothesis import strategies as st
from kazoo.client import KazooClient

from lakecore.concurrency.locks import zookeeper as zookeeper_lock_module
from lakecore.concurrency.locks.protocol import ensure_held
from lakecore.concurrency.locks.zookeeper import ZooKeeperLock, zookeeper_lock
from lakecore.concurrency.zookeeper import close_shared_clients, shared_clients, table_lock_key, znode_name
from lakecore.errors import LockError, LockTimeout, LockUnavailable
from tests.lakecore.concurrency.locks.test_lock_contract import REPO_ROOT, in_thread
from tests.support.zookeeper import ZooKeeperServer, free_port

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def locks() -> Iterator[list[ZooKeeperLock]]:
    made: list[ZooKeeperLock] = []
    yield made
    for lock in made:
        lock.close()
    close_shared_clients()


def base_path() -> str:
    return f"/weir-tests/{uuid.uuid4().hex[:8]}"


def test_unreachable_zookeeper_fails_fast_and_says_what_to_do(locks: list[ZooKeeperLock]) -> None:
    connect = f"127.0.0.1:{free_port()}"  # nothing listens there
    for share_client in (True, False):
        lock = zookeeper_lock(connect, "orders", connection_timeout_s=1.0, share_client=share_client)
        locks.append(lock)
        started = time.monotonic()
        with pytest.raises(LockUnavailable) as raised:
            lock.acquire(timeout=30)
        assert time.monotonic() - started < 2.5
        assert connect in str(raised.value) and "ZooKeeper is running" in str(raised.value)
        assert not lock.is_held()
        lock.release()  # nothing to release, and no error
    assert connect not in shared_clients  # the failed client does not keep retrying in the background


def test_a_sigkilled_holder_frees_the_lock_after_its_session_timeout(
    zookeeper_server: ZooKeeperServer, locks: list[ZooKeeperLock], tmp_path: Path,
) -> None:
    options = {"provider": "zookeeper", "connect": zookeeper_server.connect_string, "key": "orders",
               "base_path": base_path(), "session_timeout_s": 2.0}
    command = [sys.executable, "-m", "tests.lakecore.concurrency.locks.lock_worker", "hold",
               json.dumps(options), str(tmp_path / "table")]
    with subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            contender = zookeeper_lock(zookeeper_server.connect_string, "orders",
                                       base_path=options["base_path"])
            locks.append(contender)
            error = in_thread(lambda: contender.acquire(timeout=0.3))
            assert isinstance(error, LockTimeout) and f":{holder.pid}:" in str(error)  # names the holder

            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(timeout=10)
            killed = time.monotonic()
            contender.acquire(timeout=15)
            waited = time.monotonic() - killed
        finally:
            if holder.poll() is None:
                holder.kill()
    assert contender.is_held()
    assert 1.0 < waited < 6.0  # ZooKeeper expired the dead session (2 s), nothing earlier or much later


def test_a_released_lock_is_free_even_if_its_process_ends_abruptly_right_after(
    zookeeper_server: ZooKeeperServer, locks: list[ZooKeeperLock], tmp_path: Path,
) -> None:
    """release() returns once ZooKeeper deleted the node: a writer that ends without closing its session
    (os._exit, a SIGKILL just after its commit) never leaves the lock to its session timeout."""
    options = {"provider": "zookeeper", "connect": zookeeper_server.connect_string, "key": "orders",
               "base_path": base_path(), "session_timeout_s": 20.0}
    for _ in range(3):
        subprocess.run([sys.executable, "-m", "tests.lakecore.concurrency.locks.lock_worker", "drop",
                        json.dumps(options), str(tmp_path / "table")], cwd=REPO_ROOT, check=True, timeout=60)
        contender = zookeeper_lock(zookeeper_server.connect_string, "orders", base_path=options["base_path"])
        locks.append(contender)
        contender.acquire(timeout=5)  # not 20 s
        contender.release()


def test_a_holder_stopped_past_its_session_is_told_it_lost_the_lock(
    zookeeper_server: ZooKeeperServer, locks: list[ZooKeeperLock], tmp_path: Path,
) -> None:
    """is_held() answers from a short lease after ZooKeeper proved the node ours: a process stopped
    (SIGSTOP, a long GC pause) for longer than its session, while another took the lock, must hear on
    waking that it lost it, before it could complete anything."""
    options = {"provider": "zookeeper", "connect": zookeeper_server.connect_string, "key": "orders",
               "base_path": base_path(), "session_timeout_s": 2.0}
    command = [sys.executable, "-m", "tests.lakecore.concurrency.locks.lock_worker", "ask",
               json.dumps(options), str(tmp_path / "table")]
    with subprocess.Popen(command, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        try:
            assert holder.stdout.readline().strip() == "held"
            holder.stdin.write("\n")
            holder.stdin.flush()
            assert holder.stdout.readline().strip() == "held"
            os.kill(holder.pid, signal.SIGSTOP)
            contender = zookeeper_lock(zookeeper_server.connect_string, "orders",
                                       base_path=options["base_path"])
            locks.append(contender)
            contender.acquire(timeout=15)  # ZooKeeper expired the stopped holder's session
            os.kill(holder.pid, signal.SIGCONT)
            holder.stdin.write("\n")  # asked the moment it wakes
            holder.stdin.flush()
            assert holder.stdout.readline().strip() == "lost"
            assert contender.is_held()
        finally:
            if holder.poll() is None:
                holder.kill()


def test_is_held_trusts_a_proof_of_the_node_only_for_its_short_lease(
    zookeeper_server: ZooKeeperServer, locks: list[ZooKeeperLock], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Within LEASE_S of the request that proved the node ours, is_held() answers without a round trip;
    after it, it asks ZooKeeper. A node deleted behind the holder's back (by hand: nothing else deletes a
    live session's node) is seen once the lease has run out."""
    lock = zookeeper_lock(zookeeper_server.connect_string, "orders", base_path=base_path())
    locks.append(lock)
    offset = [0.0]
    real_now = zookeeper_lock_module._now
    monkeypatch.setattr(zookeeper_lock_module, "_now", lambda: real_now() + offset[0])
    lock.acquire(timeout=5)
    assert lock.is_held()
    offset[0] += zookeeper_lock_module.LEASE_S + 0.1
    assert lock.is_held()  # asked ZooKeeper: still ours, and that proof starts a new lease
    client = KazooClient(hosts=zookeeper_server.connect_string)
    client.start(timeout=10)
    try:
        client.delete(lock._hold.path)  # type: ignore[union-attr]
    finally:
        client.stop()
        client.close()
    assert lock.is_held()  # within the lease: not asked (the documented limit)
    offset[0] += zookeeper_lock_module.LEASE_S + 0.1
    assert not lock.is_held()
    with pytest.raises(LockError, match="lost the table lock"):
        ensure_held(lock, "completing instant 20261122101500123")
    lock.release()


def test_stopping_zookeeper_loses_the_lock_and_a_restart_brings_it_back(
    zookeeper_factory: Callable[[], ZooKeeperServer], locks: list[ZooKeeperLock],
) -> None:
    server = zookeeper_factory()

    def new_lock() -> ZooKeeperLock:
        lock = zookeeper_lock(server.connect_string, "orders", share_client=False, session_timeout_s=2.0,
                              connection_timeout_s=2.0)
        locks.append(lock)
        return lock

    holder, waiter = new_lock(), new_lock()
    holder.acquire(timeout=5)
    assert holder.is_held()
    waited: list[BaseException | None] = []
    began = time.monotonic()
    waiting = threading.Thread(target=lambda: waited.append(in_thread(lambda: waiter.acquire(timeout=3))))
    waiting.start()
    time.sleep(0.3)  # the waiter is queued behind the holder

    server.stop()
    stopped = time.monotonic()
    while holder.is_held() and time.monotonic() - stopped < 5:
        time.sleep(0.01)
    assert not holder.is_held() and time.monotonic() - stopped < 3
    with pytest.raises(LockError, match="lost the table lock"):
        ensure_held(holder, "completing instant 20261122101500123")
    started = time.monotonic()
    holder.release()  # must not raise, nor wait for ZooKeeper
    assert time.monotonic() - started < 1.0
    waiting.join(timeout=10)
    # The waiter gives up about when its timeout says, instead of hanging until ZooKeeper is back.
    assert isinstance(waited[0], LockUnavailable) and time.monotonic() - began < 3 + 2

    server.start()
    holder.acquire(timeout=15)
    assert holder.is_held()
    holder.release()
    waiter.acquire(timeout=15)
    assert waiter.is_held()


def test_keyed_locks_are_independent_and_live_under_escaped_znodes(
    zookeeper_server: ZooKeeperServer, locks: list[ZooKeeperLock],
) -> None:
    base = base_path()

    def new_lock(key: str) -> ZooKeeperLock:
        lock = zookeeper_lock(zookeeper_server.connect_string, key, base_path=base)
        locks.append(lock)
        return lock

    a, b = new_lock("dt=2026-11-22/0007"), new_lock("dt=2026-11-22/0008")
    a_again = new_lock("dt=2026-11-22/0007")
    a.acquire(timeout=5)
    b.acquire(timeout=5)  # another file group: not blocked
    assert isinstance(in_thread(lambda: a_again.acquire(timeout=0.3)), LockTimeout)

    client = KazooClient(hosts=zookeeper_server.connect_string)
    client.start(timeout=10)
    try:
        assert sorted(client.get_children(base)) == ["dt=2026-11-22%2F0007", "dt=2026-11-22%2F0008"]
        assert len(client.get_children(f"{base}/dt=2026-11-22%2F0007")) == 1  # a's node; a_again left none
    finally:
        client.stop()
        client.close()


@given(st.text(min_size=1), st.text(min_size=1))
def test_every_key_gets_its_own_safe_znode_name(first: str, second: str) -> None:
    for key in (first, second):
        name = znode_name(key)
        assert "/" not in name and name not in (".", "..") and 0 < len(name) <= 200
        assert name.isascii() and name.isprintable()
    assert (znode_name(first) == znode_name(second)) == (first == second)


def test_znode_names_stay_readable() -> None:
    assert znode_name("dt=2026-11-22/0007-abc") == "dt=2026-11-22%2F0007-abc"
    assert znode_name("orders") == "orders"
    assert len({znode_name(k) for k in ("a/b", "a%2Fb", "a~b", "a%7Eb", ".", "%2E", "x" * 500)}) == 7
    key = table_lock_key("s3://bucket/warehouse/orders/")
    assert key.startswith("bucket-warehouse-orders-") and znode_name(key) == key
    assert key == table_lock_key("s3://bucket/warehouse/orders")
    assert key != table_lock_key("s3://bucket/warehouse-orders")
