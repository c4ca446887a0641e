"""The storage lock breaks a lock only once its holder's lease ran out on the breaker's own clock, or
at once when the holder ran on this machine and its process is gone; it breaks it with one conditional
create (so two breakers never both win), and refuses storage that cannot create a file atomically."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lakecore.concurrency import StorageLock, lock_from_options
from lakecore.errors import LockTimeout, LockUnsupported
from lakecore.storage import Storage, open_storage
from lakecore.storage.fsspec_store import FsspecStorage
from tests.lakecore.concurrency.locks.test_lock_contract import REPO_ROOT, in_thread


def test_a_dead_holders_lock_is_broken_after_its_lease(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path / "table"))
    ghost = StorageLock(storage, expiry_s=0.3)
    ghost.acquire()  # and never released: its process died
    lock = StorageLock(storage)
    lock.acquire(timeout=5)
    assert lock.is_held() and not ghost.is_held()
    lock.release()
    assert not lock.is_held()
    with StorageLock(storage) as again:  # released: taken at once, no lease to wait out
        assert again.is_held()


def test_a_live_owners_lock_is_left_alone(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path / "table"))
    holder, contender = StorageLock(storage, expiry_s=60), StorageLock(storage)
    holder.acquire()
    before = _lock_files(storage)
    error = in_thread(lambda: contender.acquire(timeout=0.3))
    assert isinstance(error, LockTimeout)
    assert "retry" in str(error)
    assert _lock_files(storage) == before and holder.is_held()
    holder.release()


def test_a_holder_past_its_expiry_loses_the_lock_and_its_release_spares_the_next_holder(
    tmp_path: Path,
) -> None:
    storage = open_storage(str(tmp_path / "table"))
    slow, next_holder = StorageLock(storage, expiry_s=0.3), StorageLock(storage)
    slow.acquire()
    time.sleep(0.4)  # the lease running out is the point, not a race
    assert not slow.is_held()  # so ensure_held stops it before it completes an instant
    next_holder.acquire(timeout=2)
    slow.release()
    assert next_holder.is_held()
    assert isinstance(in_thread(lambda: StorageLock(storage).acquire(timeout=0.2)), LockTimeout)
    next_holder.release()


class PausedBeforeBreaking:
    """The table's real storage, except that this contender's first change of a lock file that it had
    not tried before (a create or a delete), after it read a lock file, waits for `go`: the moment
    between "read the stale lock" and "break it". Retrying the create of a lock it saw held is no break."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner
        self.reached, self.go = threading.Event(), threading.Event()
        self._read = self._paused = False
        self._tried: set[tuple[str, str]] = set()

    @property
    def uri(self) -> str:
        return self.inner.uri

    def read(self, path: str) -> bytes:
        data = self.inner.read(path)
        self._read = self._read or path.startswith(".weir/lock")
        return data

    def write_if_absent(self, path: str, data: bytes, *, durable: bool = True) -> None:
        self._pause("create", path)
        self.inner.write_if_absent(path, data, durable=durable)

    def delete(self, path: str) -> None:
        self._pause("delete", path)
        self.inner.delete(path)

    def _pause(self, change: str, path: str) -> None:
        new = (change, path) not in self._tried
        self._tried.add((change, path))
        if path.startswith(".weir/lock") and self._read and new and not self._paused:
            self._paused = True
            self.reached.set()
            assert self.go.wait(30), "the test never let the paused contender go on"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_two_contenders_breaking_one_stale_lock_never_both_hold_it(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path / "table"))
    ghost = StorageLock(storage, expiry_s=0.2)
    ghost.acquire()  # dies holding it
    paused = PausedBeforeBreaking(storage)
    first = StorageLock(paused, expiry_s=30)  # type: ignore[arg-type]
    result: list[BaseException | None] = []
    thread = threading.Thread(target=lambda: result.append(in_thread(lambda: first.acquire(timeout=3))))
    thread.start()
    assert paused.reached.wait(30), "the first contender never got to breaking the stale lock"

    second = StorageLock(storage, expiry_s=30)
    second.acquire(timeout=5)  # breaks the same stale lock while the first one is about to
    paused.go.set()
    thread.join(timeout=30)

    assert isinstance(result[0], LockTimeout), "both contenders broke the stale lock and both hold it"
    assert second.is_held() and not first.is_held()
    second.release()


def _hold_in_process(table: Path, options: dict[str, Any], skew_s: float) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tests.lakecore.concurrency.locks.lock_worker", "hold",
               json.dumps(options), str(table)]
    worker = subprocess.Popen(
        command,
        cwd=REPO_ROOT, env={**os.environ, "WEIR_TEST_CLOCK_SKEW_S": str(skew_s)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "held", worker.communicate(timeout=30)
    return worker


@pytest.mark.parametrize(("holder_skew_s", "contender_skew_s"), [(-3600, 0), (0, 3600)],
                         ids=["holder clock an hour behind", "contender clock an hour ahead"])
def test_skewed_wall_clocks_never_break_a_live_lock(tmp_path: Path, holder_skew_s: float,
                                                     contender_skew_s: float) -> None:
    table = tmp_path / "table"
    holder = _hold_in_process(table, {"provider": "storage", "expiry_s": 30}, holder_skew_s)
    try:
        contender = subprocess.run(
            [sys.executable, "-m", "tests.lakecore.concurrency.locks.lock_worker", "try",
             json.dumps({"provider": "storage"}), str(table), "1.0"],
            cwd=REPO_ROOT, env={**os.environ, "WEIR_TEST_CLOCK_SKEW_S": str(contender_skew_s)},
            capture_output=True, text=True, timeout=60)
        assert contender.returncode == 0, contender.stderr
        assert contender.stdout.strip() == "timeout", "a live lock was broken because of a skewed clock"
    finally:
        holder.kill()
        holder.communicate()


def test_a_dead_holder_whose_clock_ran_ahead_is_broken_after_its_lease(tmp_path: Path) -> None:
    table = tmp_path / "table"
    holder = _hold_in_process(table, {"provider": "storage", "expiry_s": 0.5}, 3600)
    holder.kill()
    holder.communicate()
    lock = StorageLock(open_storage(str(table)))
    lock.acquire(timeout=10)  # not an hour
    assert lock.is_held()
    lock.release()


def test_a_killed_holder_on_this_machine_is_broken_without_waiting_out_its_lease(tmp_path: Path) -> None:
    table = tmp_path / "table"
    holder = _hold_in_process(table, {"provider": "storage", "expiry_s": 600}, 0)
    storage = open_storage(str(table))
    assert isinstance(in_thread(lambda: StorageLock(storage).acquire(timeout=0.3)), LockTimeout)  # alive
    holder.kill()
    holder.communicate()
    lock = StorageLock(storage)
    lock.acquire(timeout=10)  # not its 600 s lease
    assert lock.is_held()
    lock.release()


_FORKED_HOLDER = """
import os, sys, time
from lakecore.concurrency import StorageLock
from lakecore.storage import open_storage
lock = StorageLock(open_storage(sys.argv[1]))  # made here; this process ends at once
maker = os.getpid()  # read before the fork: the maker may have ended before the fork first runs
if os.fork() == 0:
    while os.getppid() == maker:  # until the maker has ended
        time.sleep(0.01)
    lock.acquire(timeout=10)
    print(os.getpid(), flush=True)
    time.sleep(600)
"""


@contextmanager
def _forking(script: str, table: Path) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """Run `script` on `table`; its fork's first line starts with the fork's pid. Yields the script's
    process and that line's words; kills the fork afterwards (it held the pipes open)."""
    maker = subprocess.Popen([sys.executable, "-c", script, str(table)], cwd=REPO_ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)   # the fork too: killed as a group if it hangs
    assert maker.stdout is not None
    ready, _, _ = select.select([maker.stdout], [], [], 60)
    if not ready:
        os.killpg(maker.pid, signal.SIGKILL)
        _, err = maker.communicate(timeout=30)
        pytest.fail(f"the fork printed nothing within 60 s; the script's stderr:\n{err}")
    words = maker.stdout.readline().split()
    try:
        yield maker, words
    finally:
        if words:
            os.kill(int(words[0]), 9)
        maker.communicate(timeout=30)


def test_a_lock_object_that_crossed_a_fork_names_the_process_holding_it(tmp_path: Path) -> None:
    table = tmp_path / "table"
    with _forking(_FORKED_HOLDER, table) as (maker, _):  # the fork prints once it holds the lock
        assert maker.wait(timeout=30) == 0  # the process that made the lock object has ended
        error = in_thread(lambda: StorageLock(open_storage(str(table))).acquire(timeout=0.5))
        assert isinstance(error, LockTimeout), "a live holder's lock was broken: it named its maker's pid"


_HELD_THEN_FORKED = """
import os, sys, time
from lakecore.concurrency import StorageLock
from lakecore.storage import open_storage
lock = StorageLock(open_storage(sys.argv[1]))
lock.acquire()
holder = os.getpid()  # read before the fork: the holder may have ended before the fork first runs
if os.fork() == 0:
    while os.getppid() == holder:  # until the holder has ended without releasing
        time.sleep(0.01)
    print(os.getpid(), lock.is_held(), flush=True)
    lock.release()  # must free nothing: the lock was the holder's
    print("released", flush=True)
    time.sleep(600)
os._exit(0)
"""


def test_a_fork_of_a_holder_neither_holds_nor_frees_its_lock(tmp_path: Path) -> None:
    from lakecore.concurrency.locks.storage import newest_generation

    table = tmp_path / "table"
    with _forking(_HELD_THEN_FORKED, table) as (maker, (_, held_there)):
        assert held_there == "False", "a fork of the holder believes it holds the lock"
        assert maker.stdout is not None and maker.stdout.readline().strip() == "released"
        newest = newest_generation(open_storage(str(table)))
        assert newest is not None and newest.state == "held" and newest.pid == maker.pid  # nothing freed


@pytest.mark.s3
def test_on_an_object_store_a_killed_holder_waits_out_its_lease(s3_server: Any, tmp_path: Path) -> None:
    """A killed process's last request may still be on its way to an object store and land later (a
    commit, say): there a contender gives it the lease even when the holder is known to be gone."""
    from lakecore.concurrency.locks.storage import newest_generation

    bucket = f"weir-{os.urandom(6).hex()}"
    s3_server.client().create_bucket(Bucket=bucket)
    uri, options = f"s3://{bucket}/table", s3_server.s3fs_options()
    holder = subprocess.Popen(
        [sys.executable, "-m", "tests.lakecore.concurrency.locks.lock_worker", "hold",
         json.dumps({"provider": "storage", "expiry_s": 600, "storage_options": options}), uri],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held", holder.communicate(timeout=30)
    holder.kill()
    holder.communicate()
    storage = open_storage(uri, options)
    newest = newest_generation(storage)
    assert newest is not None and newest.holder_gone() and not newest.breaks_at_once(storage)
    assert isinstance(in_thread(lambda: StorageLock(storage).acquire(timeout=1.0)), LockTimeout)


def _gone_pid() -> int:
    """A pid no process has now (one this test started and reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("where", ["another host", "another PID namespace or boot",
                                   "no process space recorded", "its process still runs"])
def test_a_holder_that_may_still_run_waits_out_its_lease(tmp_path: Path, where: str) -> None:
    from lakecore.concurrency.locks.storage import Generation, path_of
    from lakecore.concurrency.processes import process_space

    storage = open_storage(str(tmp_path / "table"))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        host, pid, space = socket.gethostname(), _gone_pid(), process_space()
        if where == "another host":
            host = f"not-{host}"
        elif where == "another PID namespace or boot":
            space = "another-boot/pid:[4026531836]"
        elif where == "no process space recorded":
            space = ""
        else:
            pid = sleeper.pid
        storage.write_if_absent(path_of(1), Generation(1, "held", f"{host}:{pid}:x", "t1", 600.0, host, pid,
                                                       space).encode())
        assert isinstance(in_thread(lambda: StorageLock(storage).acquire(timeout=0.5)), LockTimeout)
        assert [f.path for f in storage.list_tree(".weir/locks")] == [path_of(1)]  # nothing broken
    finally:
        sleeper.kill()
        sleeper.wait()


def test_breaking_is_decided_on_the_contenders_own_clock_alone() -> None:
    from lakecore.concurrency.locks.storage import Generation, next_step

    held = Generation(7, "held", "host:1:x", "t7", lease_s=10.0)
    assert next_step(None, None, 0.0) == "create"  # no lock yet
    assert next_step(Generation(7, "free"), 5.0, 5.0) == "create"  # released
    assert next_step(held, 100.0, 109.9) == "wait"  # seen for less than its lease
    assert next_step(held, 100.0, 110.0) == "create"  # unchanged for its whole lease: stale
    unreadable = Generation.decode(8, b"\x00garbage")
    assert unreadable.state == "held" and unreadable.lease_s == 60.0  # broken only after a default lease
    assert Generation.decode(7, held.encode()) == held
    assert next_step(held, 100.0, 100.0, at_once=True) == "create"  # its holder is gone: no lease
    assert not held.holder_gone()  # a file without a process space (an older one) is never judged
    huge = Generation.decode(9, b'{"state": "held", "lease_s": 5, "pid": 1e400}')
    assert huge.owner.startswith("unknown") and huge.lease_s == 60.0  # unreadable, not a crash
    from lakecore.concurrency.processes import process_gone, process_space

    assert not process_gone(socket.gethostname(), process_space(), 2**40)  # no such pid: not judged


def test_storage_without_atomic_create_is_refused(tmp_path: Path) -> None:
    storage = FsspecStorage(f"file://{tmp_path}/table")  # fsspec's local files: no create-if-absent
    for lock in (StorageLock(storage), lock_from_options(storage, {"provider": "storage"})):
        with pytest.raises(LockUnsupported, match=r"atomic create-if-absent.*'zookeeper'") as raised:
            lock.acquire(timeout=5)
        assert not raised.value.retryable
        assert not lock.is_held()
        lock.release()
    assert not any((tmp_path / "table" / ".weir").glob("lock*/*"))


def _lock_files(storage: Storage) -> dict[str, bytes]:
    return {f.path: storage.read(f.path) for f in storage.list_tree(".weir") if "lock" in f.path}
