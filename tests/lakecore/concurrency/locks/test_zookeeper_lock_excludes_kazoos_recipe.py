"""The ZooKeeper table lock runs its own recipe (one round trip to acquire a free lock) on kazoo's node
names and rule, so a process on kazoo's `Lock` (an older Weir) and one on this lock exclude each other
on the same lock path, in either order and when both queue on it."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("kazoo")

from hypothesis import given
from hypothesis import strategies as st
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout as KazooLockTimeout
from kazoo.recipe.lock import Lock as KazooLock

from lakecore.concurrency.locks.zookeeper import NODE_MARK, ZooKeeperLock, predecessor, zookeeper_lock
from lakecore.concurrency.zookeeper import close_shared_clients
from lakecore.errors import LockTimeout
from tests.lakecore.concurrency.locks.test_lock_contract import in_thread
from tests.support.zookeeper import ZooKeeperServer

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def client(zookeeper_server: ZooKeeperServer) -> Iterator[KazooClient]:
    c = KazooClient(hosts=zookeeper_server.connect_string)
    c.start(timeout=15)
    yield c
    c.stop()
    c.close()
    close_shared_clients()


def ours(server: ZooKeeperServer, base: str) -> ZooKeeperLock:
    return zookeeper_lock(server.connect_string, "orders", base_path=base)


def test_each_refuses_the_lock_while_the_other_holds_it(zookeeper_server: ZooKeeperServer,
                                                        client: KazooClient) -> None:
    base = f"/weir-tests/{uuid.uuid4().hex[:8]}"
    lock = ours(zookeeper_server, base)
    theirs = KazooLock(client, lock.path, identifier="kazoo")
    try:
        assert theirs.acquire(timeout=5)
        error = in_thread(lambda: lock.acquire(timeout=0.3))
        assert isinstance(error, LockTimeout) and "kazoo" in str(error)  # names the holder
        theirs.release()
        lock.acquire(timeout=5)
        with pytest.raises(KazooLockTimeout):
            theirs.acquire(timeout=0.3)
        lock.release()
        assert theirs.acquire(timeout=5)
        theirs.release()
        assert client.get_children(lock.path) == []  # the timed-out contenders left no node
    finally:
        lock.close()


def test_both_recipes_queued_on_one_lock_never_overlap(zookeeper_server: ZooKeeperServer,
                                                       client: KazooClient) -> None:
    base = f"/weir-tests/{uuid.uuid4().hex[:8]}"
    path = ours(zookeeper_server, base).path
    inside: list[str] = []
    overlaps: list[tuple[str, str]] = []
    entries: list[str] = []
    errors: list[BaseException] = []
    guard = threading.Lock()

    def critical(who: str) -> None:
        with guard:
            if inside:
                overlaps.append((inside[0], who))
            inside.append(who)
            entries.append(who)
        time.sleep(0.002)  # long enough for the others to queue behind
        with guard:
            inside.remove(who)

    def run_ours(n: int) -> None:
        lock = zookeeper_lock(zookeeper_server.connect_string, "orders", base_path=base,
                              share_client=n % 2 == 0)  # own sessions and a shared one
        try:
            for _ in range(25):
                lock.acquire(timeout=30)
                critical(f"ours-{n}")
                lock.release()
        except BaseException as exc:
            errors.append(exc)
        finally:
            lock.close()

    def run_theirs(n: int) -> None:
        c = KazooClient(hosts=zookeeper_server.connect_string)
        c.start(timeout=15)
        try:
            recipe = KazooLock(c, path, identifier=f"kazoo-{n}")
            for _ in range(25):
                assert recipe.acquire(timeout=30)
                critical(f"kazoo-{n}")
                recipe.release()
        except BaseException as exc:
            errors.append(exc)
        finally:
            c.stop()
            c.close()

    threads = [threading.Thread(target=run_ours, args=(n,)) for n in range(3)]
    threads += [threading.Thread(target=run_theirs, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert not overlaps, overlaps[:5]
    assert len(entries) == 5 * 25
    assert {e.split("-")[0] for e in entries} == {"ours", "kazoo"}
    assert client.get_children(path) == []


def test_a_contender_that_times_out_in_the_queue_leaves_no_node(zookeeper_server: ZooKeeperServer,
                                                                client: KazooClient) -> None:
    base = f"/weir-tests/{uuid.uuid4().hex[:8]}"
    holder, waiter = ours(zookeeper_server, base), ours(zookeeper_server, base)
    try:
        holder.acquire(timeout=5)
        for _ in range(3):
            assert isinstance(in_thread(lambda: waiter.acquire(timeout=0.2)), LockTimeout)
        deadline = time.monotonic() + 5
        while len(client.get_children(holder.path)) > 1 and time.monotonic() < deadline:
            time.sleep(0.02)  # the give-up's delete is sent without waiting
        assert len(client.get_children(holder.path)) == 1
        holder.release()
        waiter.acquire(timeout=5)  # nobody ahead: no leftover of its own timed-out tries
        assert waiter.is_held()
    finally:
        holder.close()
        waiter.close()


# ZooKeeper formats the sequence %010d; past 2^31 it turns negative (as long as 11 characters)
_SEQ = st.one_of(st.integers(min_value=-40, max_value=40), st.integers(min_value=-2**31, max_value=2**31 - 1))


@given(st.lists(st.tuples(st.sampled_from(["__lock__", "__rlock__", "__other__"]), _SEQ), max_size=8,
                unique_by=lambda t: t[1]), _SEQ)
def test_the_predecessor_is_the_one_kazoos_recipe_waits_behind(others: list[tuple[str, int]],
                                                               mine: int) -> None:
    if any(seq == mine for _, seq in others):
        return
    prefix = uuid.uuid4().hex + NODE_MARK
    name = f"{prefix}{mine:010d}"
    children = [f"{uuid.uuid4().hex}{mark}{seq:010d}" for mark, seq in others] + [name]
    reference: Any = KazooLock(KazooClient(hosts="127.0.0.1:1"), "/p")  # never started: no server
    reference.prefix = prefix
    reference.client = SimpleNamespace(get_children=lambda _path: list(children))
    assert predecessor(children, name) == reference._get_predecessor(name)
