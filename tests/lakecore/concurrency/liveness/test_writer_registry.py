"""The writer registry shows who is writing which instant, to anyone watching: one contract for the
in-memory and the ZooKeeper registry, and a SIGKILLed writer leaves ZooKeeper after its session."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lakecore.concurrency.liveness.writers import InMemoryWriterRegistry, WriterRegistry, writer_info
from lakecore.errors import InstantNotFound, WriterAlreadyRegistered, WriterRegistryUnavailable

if TYPE_CHECKING:
    from lakecore.concurrency.liveness.writers import ZooKeeperWriterRegistry

REPO_ROOT = Path(__file__).resolve().parents[4]
TABLE, OTHER_TABLE = "s3://lake/orders", "s3://lake/customers"
T1, T2 = "20261122101500123", "20261122101500456"

WRITER = """
import sys, time
from lakecore.concurrency.liveness.writers import ZooKeeperWriterRegistry, writer_info
connect, base_path, table, instant = sys.argv[1:5]
registry = ZooKeeperWriterRegistry(connect, base_path=base_path, session_timeout_s=2.0)
registry.register(table, instant, writer_info("upsert"))
print("registered", flush=True)
time.sleep(600)
"""


class Seen:
    """What a watch callback was called with, in order."""

    def __init__(self) -> None:
        self.calls: list[frozenset[str]] = []
        self._changed = threading.Condition()

    def __call__(self, live: frozenset[str]) -> None:
        with self._changed:
            self.calls.append(live)
            self._changed.notify_all()

    def wait_for(self, expected: set[str], timeout: float = 5.0) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: bool(self.calls) and self.calls[-1] == expected, timeout)


def zookeeper_registry(request: pytest.FixtureRequest, base_path: str | None = None,
                       share_client: bool = True) -> ZooKeeperWriterRegistry:
    from lakecore.concurrency.liveness.writers import ZooKeeperWriterRegistry

    server = request.getfixturevalue("zookeeper_server")
    return ZooKeeperWriterRegistry(server.connect_string, base_path=base_path or new_base_path(),
                                   session_timeout_s=4.0, connection_timeout_s=5.0, share_client=share_client)


def new_base_path() -> str:
    return f"/weir-tests/{uuid.uuid4().hex[:8]}"


@pytest.fixture(params=["memory", pytest.param("zookeeper", marks=pytest.mark.zookeeper)])
def registry(request: pytest.FixtureRequest) -> Iterator[WriterRegistry]:
    made = InMemoryWriterRegistry() if request.param == "memory" else zookeeper_registry(request)
    yield made
    made.close()
    if request.param == "zookeeper":
        from lakecore.concurrency.zookeeper import close_shared_clients

        close_shared_clients()


def test_a_registered_writer_is_live_until_its_registration_closes(registry: WriterRegistry) -> None:
    assert registry.live_writers(TABLE) == {}
    info = writer_info("upsert", clock=lambda: 1_763_806_500_123, spark_app="app-1")
    registration = registry.register(TABLE, T1, info)
    assert registry.live_writers(TABLE) == {T1: info}
    assert info["host"] and info["pid"] == os.getpid() and info["started"] == 1_763_806_500_123
    assert info["operation"] == "upsert"
    assert registry.live_writers(OTHER_TABLE) == {}  # tables are independent

    with registry.register(OTHER_TABLE, T1, {"operation": "insert"}) as other:
        assert registry.live_writers(OTHER_TABLE) == {T1: {"operation": "insert"}}
    assert other.closed and registry.live_writers(OTHER_TABLE) == {}

    registration.close()
    registration.close()  # twice is fine
    assert registry.live_writers(TABLE) == {}


def test_an_instant_has_one_writer_at_a_time(registry: WriterRegistry) -> None:
    first = registry.register(TABLE, T1, {})
    with pytest.raises(WriterAlreadyRegistered, match=T1):
        registry.register(TABLE, T1, {})
    first.close()
    registry.register(TABLE, T1, {"again": True}).close()


def test_only_instant_times_register(registry: WriterRegistry) -> None:
    with pytest.raises(InstantNotFound, match="17 digits"):
        registry.register(TABLE, "../escape", {})
    with pytest.raises(TypeError, match="JSON"):
        registry.register(TABLE, T1, {"started": object()})
    assert registry.live_writers(TABLE) == {}


def test_a_watch_sees_writers_join_and_leave_until_it_is_closed(registry: WriterRegistry) -> None:
    seen = Seen()
    watch = registry.watch(TABLE, seen)
    assert seen.wait_for(set())  # called at once with who is there now
    first = registry.register(TABLE, T1, {})
    assert seen.wait_for({T1})
    second = registry.register(TABLE, T2, {})
    assert seen.wait_for({T1, T2})
    first.close()
    assert seen.wait_for({T2})
    registry.register(OTHER_TABLE, T1, {}).close()  # another table's writers are not ours to see
    watch.close()
    calls = len(seen.calls)
    second.close()
    time.sleep(0.3)
    assert len(seen.calls) == calls and seen.calls[-1] == {T2}


def test_a_failing_callback_does_not_break_the_registry(registry: WriterRegistry) -> None:
    def explode(live: frozenset[str]) -> None:
        raise RuntimeError("callback bug")

    seen = Seen()
    registry.watch(TABLE, explode)
    registry.watch(TABLE, seen)
    with registry.register(TABLE, T1, {}):
        assert seen.wait_for({T1})
    assert seen.wait_for(set())


# -- ZooKeeper only ----------------------------------------------------------------------------


@pytest.mark.zookeeper
def test_a_sigkilled_writer_leaves_after_its_session_timeout(request: pytest.FixtureRequest) -> None:
    from lakecore.concurrency.liveness.writers import ZooKeeperWriterRegistry
    from lakecore.concurrency.zookeeper import close_shared_clients

    server = request.getfixturevalue("zookeeper_server")
    base_path = new_base_path()
    watcher = ZooKeeperWriterRegistry(server.connect_string, base_path=base_path)
    seen = Seen()
    try:
        watcher.watch(TABLE, seen)
        command = [sys.executable, "-c", WRITER, server.connect_string, base_path, TABLE, T1]
        with subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True) as writer:
            try:
                assert writer.stdout is not None and writer.stdout.readline().strip() == "registered"
                assert seen.wait_for({T1})
                info = watcher.live_writers(TABLE)[T1]
                assert info["pid"] == writer.pid and info["operation"] == "upsert"
                os.kill(writer.pid, signal.SIGKILL)
                writer.wait(timeout=10)
                killed = time.monotonic()
                assert seen.wait_for(set(), timeout=10)
                waited = time.monotonic() - killed
            finally:
                if writer.poll() is None:
                    writer.kill()
        assert watcher.live_writers(TABLE) == {}
        assert 1.0 < waited < 6.0  # ZooKeeper expired the dead session (2 s), nothing earlier or much later
    finally:
        watcher.close()
        close_shared_clients()


@pytest.mark.zookeeper
def test_closing_a_private_client_ends_its_writers(request: pytest.FixtureRequest) -> None:
    from lakecore.concurrency.zookeeper import close_shared_clients

    base_path = new_base_path()
    watcher = zookeeper_registry(request, base_path)
    writer = zookeeper_registry(request, base_path, share_client=False)
    try:
        writer.register(TABLE, T1, {})
        assert watcher.live_writers(TABLE).keys() == {T1}
        writer.close()  # its session ends, and its ephemeral nodes with it, at once
        assert watcher.live_writers(TABLE) == {}
    finally:
        watcher.close()
        close_shared_clients()


@pytest.mark.zookeeper
def test_unreachable_zookeeper_fails_fast_and_says_so() -> None:
    from lakecore.concurrency.liveness.writers import ZooKeeperWriterRegistry
    from tests.support.zookeeper import free_port

    connect = f"127.0.0.1:{free_port()}"  # nothing listens there
    registry = ZooKeeperWriterRegistry(connect, connection_timeout_s=0.5, share_client=False)
    started = time.monotonic()
    with pytest.raises(WriterRegistryUnavailable, match=connect) as raised:
        registry.register(TABLE, T1, {})
    assert raised.value.retryable and time.monotonic() - started < 2.0
    registry.close()


def test_table_writes_register_while_they_run(tmp_path):
    import pyarrow as pa

    from lakecore import RegistrationOptions, Table, WriterOptions
    from lakecore.concurrency.liveness.writers import InMemoryWriterRegistry

    registry = InMemoryWriterRegistry()
    seen: list[frozenset[str]] = []
    infos: list[dict] = []
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]), record_key="id",
                     options=WriterOptions(registration=RegistrationOptions(registry, "clicks-ingest")))
    watch = registry.watch(t.uri, lambda live: (seen.append(live), infos.extend(
        registry.live_writers(t.uri).values())))
    result = t.upsert(pa.table({"id": pa.array([1, 2], pa.int64())}))
    watch.close()
    assert frozenset({result.instant.requested_time}) in seen  # registered during the write
    assert infos and infos[0]["writer"] == "clicks-ingest" and infos[0]["operation"] == "upsert"
    assert seen[-1] == frozenset() and registry.live_writers(t.uri) == {}  # and gone after it
