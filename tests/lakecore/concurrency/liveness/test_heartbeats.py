"""A writer's heartbeat keeps its instant alive while it runs; once it stops beating (killed, or storage
failing) everyone — the writer itself included — sees the instant as expired after interval x misses."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from lakecore.concurrency.liveness.heartbeat import (
    HEARTBEATS_DIR,
    Heartbeat,
    HeartbeatConfig,
    beat,
    delete_heartbeat,
    expired_instants,
    heartbeat_path,
    is_expired,
    list_heartbeats,
    read_last_beat,
)
from lakecore.errors import HeartbeatExpired, InvalidInstantState, InvalidTableConfig, StorageError
from lakecore.storage import FileInfo, Storage, open_storage
from lakecore.timeline import now_ms

REPO_ROOT = Path(__file__).resolve().parents[4]
T1, T2 = "20261122101500123", "20261122101500456"
FAST = HeartbeatConfig(interval_s=0.05, tolerable_misses=3)
SLOW = HeartbeatConfig(interval_s=10.0, tolerable_misses=3)  # the thread never beats within a test

WRITER = """
import sys, time
from lakecore.storage import open_storage
from lakecore.concurrency.liveness.heartbeat import Heartbeat, HeartbeatConfig
table, instant, interval = sys.argv[1], sys.argv[2], float(sys.argv[3])
Heartbeat(open_storage(table), instant, HeartbeatConfig(interval_s=interval, tolerable_misses=3)).start()
print("beating", flush=True)
time.sleep(600)
"""


@pytest.fixture(params=["local", "memory"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    if request.param == "local":
        yield open_storage(str(tmp_path / "table"))
        return
    store = open_storage(f"memory://heartbeats-{uuid.uuid4().hex[:8]}/table")
    yield store
    for info in store.list_tree(""):
        store.delete(info.path)


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class FlakyStorage:
    """Delegates to a real storage; writes raise while `failing` (or for the next `fail_next` writes)."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.failing = False
        self.fail_next = 0
        self.writes = 0

    @property
    def uri(self) -> str:
        return self.inner.uri

    def read(self, path: str) -> bytes:
        return self.inner.read(path)

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        if self.failing or self.fail_next > 0:
            self.fail_next = max(0, self.fail_next - 1)
            raise StorageError(f"writing {path} failed: simulated outage")
        self.writes += 1
        self.inner.write(path, data, durable=durable)

    def write_if_absent(self, path: str, data: bytes, *, durable: bool = True) -> None:
        self.inner.write_if_absent(path, data, durable=durable)

    def sync(self, path: str) -> None:
        self.inner.sync(path)

    def exists(self, path: str) -> bool:
        return self.inner.exists(path)

    def list_dir(self, directory: str) -> list[FileInfo]:
        return self.inner.list_dir(directory)

    def list_tree(self, directory: str) -> list[FileInfo]:
        return self.inner.list_tree(directory)

    def delete(self, path: str) -> None:
        self.inner.delete(path)

    def arrow(self) -> tuple[pafs.FileSystem, str]:
        return self.inner.arrow()


def eventually(condition: Callable[[], bool], timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


# -- the rule ----------------------------------------------------------------------------------


def test_expiry_is_exactly_interval_times_misses_after_the_last_beat() -> None:
    config = HeartbeatConfig(interval_s=10.0, tolerable_misses=3)
    assert config.timeout_ms == 30_000
    assert not is_expired(1_000_000, 1_000_000, config)
    assert not is_expired(1_000_000, 1_030_000, config)  # at the boundary: still alive
    assert is_expired(1_000_000, 1_030_001, config)
    assert not is_expired(1_000_000, 999_000, config)  # a beat "from the future" (clock skew) is alive
    assert is_expired(None, 0, config)  # never beat
    assert HeartbeatConfig(interval_s=0.05, tolerable_misses=3).timeout_ms == 150  # no float dust


@pytest.mark.parametrize("bad", [{"interval_s": 0}, {"interval_s": -1.0}, {"interval_s": float("nan")},
                                 {"interval_s": float("inf")}, {"tolerable_misses": 0},
                                 {"tolerable_misses": 1.5}, {"tolerable_misses": True}])
def test_nonsense_configs_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(InvalidTableConfig, match="heartbeat"):
        HeartbeatConfig(**bad)  # type: ignore[arg-type]


# -- the file ----------------------------------------------------------------------------------


def test_a_beat_is_the_time_in_ascii_milliseconds(storage: Storage) -> None:
    assert read_last_beat(storage, T1) is None
    beat(storage, T1, 1_763_806_500_123)
    assert storage.read(f"{HEARTBEATS_DIR}/{T1}") == b"1763806500123"
    assert read_last_beat(storage, T1) == 1_763_806_500_123
    beat(storage, T2, 5)
    assert list_heartbeats(storage) == {T1: 1_763_806_500_123, T2: 5}
    delete_heartbeat(storage, T1)
    delete_heartbeat(storage, T1)  # already gone: fine
    assert list_heartbeats(storage) == {T2: 5}


@pytest.mark.parametrize("content", [b"", b"   ", b"17638065abc", b"\xff\xfe\x00", b"-5", b"1.5e12",
                                     b"12345678901234567890123"])
def test_a_garbled_heartbeat_counts_as_missing_so_expired(storage: Storage, content: bytes) -> None:
    storage.write(heartbeat_path(T1), content)
    assert read_last_beat(storage, T1) is None
    assert expired_instants(storage, [T1], now_ms(), SLOW) == [T1]


def test_a_truncated_beat_reads_as_a_long_ago_beat_so_expired(storage: Storage) -> None:
    storage.write(heartbeat_path(T1), str(now_ms()).encode()[:6])
    assert expired_instants(storage, [T1], now_ms(), SLOW) == [T1]


def test_expired_instants_keeps_the_dead_in_the_order_given(storage: Storage) -> None:
    now = 1_000_000
    beat(storage, T1, now - 30_001)  # just dead
    beat(storage, T2, now - 30_000)  # just alive
    missing = "20261122101500789"
    assert expired_instants(storage, [missing, T2, T1], now, SLOW) == [missing, T1]


# -- the writer's heartbeat ----------------------------------------------------------------------


def test_a_heartbeat_beats_periodically_until_stopped_and_stop_deletes_it(storage: Storage) -> None:
    hb = Heartbeat(storage, T1, FAST)
    started = now_ms()
    hb.start()
    first = read_last_beat(storage, T1)
    assert first is not None  # the first beat is synchronous
    seen: set[int | None] = {first}
    deadline = time.monotonic() + 3.0
    while len(seen) < 4 and time.monotonic() < deadline:
        seen.add(read_last_beat(storage, T1))
        time.sleep(0.005)
    assert len(seen) >= 4, f"beats seen: {seen}"
    last = read_last_beat(storage, T1)
    assert last is not None and last >= started and not is_expired(last, now_ms(), FAST)
    hb.check()
    assert hb.running and not hb.lost

    hb.stop()
    assert not hb.running
    assert not storage.exists(heartbeat_path(T1))
    time.sleep(0.15)  # a beat in flight when stop() ran must not bring the file back
    assert not storage.exists(heartbeat_path(T1))
    assert expired_instants(storage, [T1], now_ms(), FAST) == [T1]


def test_stop_without_delete_leaves_the_last_beat(storage: Storage) -> None:
    with Heartbeat(storage, T1, FAST) as hb:
        hb.stop(delete=False)
        last = read_last_beat(storage, T1)
        time.sleep(0.12)
        assert read_last_beat(storage, T1) == last  # no more beats
    assert not storage.exists(heartbeat_path(T1))  # leaving the block deletes it


def test_a_heartbeat_starts_once() -> None:
    hb = Heartbeat(open_storage("memory://heartbeats-once"), T1, SLOW)
    with pytest.raises(HeartbeatExpired, match="never started"):
        hb.check()
    with hb, pytest.raises(InvalidInstantState, match="already"):
        hb.start()
    with pytest.raises(InvalidInstantState, match="new Heartbeat for each write"):
        hb.start()  # nor after it stopped


def test_own_expiry_is_checked_against_the_injected_clock_at_the_boundary(storage: Storage) -> None:
    clock = Clock(1_000_000)
    with Heartbeat(storage, T1, SLOW, clock=clock) as hb:
        assert read_last_beat(storage, T1) == 1_000_000 and hb.last_beat_ms == 1_000_000
        clock.now = 1_030_000
        hb.check()
        assert not hb.lost
        clock.now = 1_030_001
        assert hb.lost
        with pytest.raises(HeartbeatExpired) as raised:
            hb.check()
        message = str(raised.value)
        assert T1 in message and "30001 ms ago" in message
        assert f"may roll instant {T1} back" in message and "retry" in message
        clock.now = 1_000_000  # lost is for good, whatever the clock says later
        assert hb.lost


def test_failing_storage_loses_the_heartbeat_and_check_says_retry(storage: Storage) -> None:
    flaky = FlakyStorage(storage)
    with Heartbeat(flaky, T1, FAST) as hb:
        first = read_last_beat(storage, T1)
        flaky.failing = True
        assert eventually(lambda: hb.lost, timeout=3.0)
        with pytest.raises(HeartbeatExpired, match=r"(?s)simulated outage.*may roll instant .* retry"):
            hb.check()
        assert eventually(lambda: not hb.running)  # a lost heartbeat stops beating
        flaky.failing = False  # storage is back: a lost heartbeat must not revive the instant
        last, writes = read_last_beat(storage, T1), flaky.writes
        time.sleep(0.2)
        assert read_last_beat(storage, T1) == last and flaky.writes == writes
        assert last is not None and first is not None and last >= first
        assert expired_instants(storage, [T1], now_ms(), FAST) == [T1]


def test_a_single_failed_beat_is_only_a_miss(storage: Storage) -> None:
    config = HeartbeatConfig(interval_s=0.1, tolerable_misses=5)
    flaky = FlakyStorage(storage)
    with Heartbeat(flaky, T1, config) as hb:
        flaky.fail_next = 1
        assert eventually(lambda: flaky.fail_next == 0)
        writes = flaky.writes
        assert eventually(lambda: flaky.writes > writes)  # the next beat went through
        hb.check()
        assert not hb.lost


def test_a_killed_writer_expires_after_interval_times_misses_and_a_live_one_never(tmp_path: Path) -> None:
    table = str(tmp_path / "table")
    storage = open_storage(table)
    config = HeartbeatConfig(interval_s=0.2, tolerable_misses=3)

    def writer(instant: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", WRITER, table, instant, str(config.interval_s)],
                                cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)

    with writer(T1) as doomed, writer(T2) as alive:
        try:
            for process in (doomed, alive):
                assert process.stdout is not None and process.stdout.readline().strip() == "beating"
            assert expired_instants(storage, [T1, T2], now_ms(), config) == []
            os.kill(doomed.pid, signal.SIGKILL)
            doomed.wait(timeout=10)
            killed = time.monotonic()
            expired_after: float | None = None
            while time.monotonic() - killed < 1.5:
                expired = expired_instants(storage, [T1, T2], now_ms(), config)
                assert T2 not in expired, "the live writer was declared dead"
                if T1 in expired and expired_after is None:
                    expired_after = time.monotonic() - killed
                time.sleep(0.01)
        finally:
            for process in (doomed, alive):
                if process.poll() is None:
                    process.kill()
    timeout_s = config.timeout_ms / 1000
    assert expired_after is not None, "the killed writer never expired"
    # Its last beat was at most one interval before the kill, so it expires within (timeout - interval,
    # timeout] of the kill (plus polling slack), never earlier.
    assert timeout_s - config.interval_s - 0.05 <= expired_after <= timeout_s + 0.3
