"""One contract, run against every lock provider (in-process, storage on local disk and on S3, ZooKeeper)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakecore.errors import LockAlreadyHeld, LockTimeout
from tests.lakecore.concurrency.locks.conftest import LockBench

REPO_ROOT = Path(__file__).resolve().parents[4]


def in_thread(fn: Callable[[], Any]) -> BaseException | None:
    """Run `fn` on another thread (a contender must not be the holding thread); its exception, if any."""
    box: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the contender hung"
    return box[0] if box else None


def test_acquire_release_and_acquire_again(bench: LockBench) -> None:
    lock, other = bench.new_lock(), bench.new_lock()
    for _ in range(3):
        lock.acquire()
        assert lock.is_held()
        assert not other.is_held()
        lock.release()
        assert not lock.is_held()
    lock.release()  # releasing a lock that is not held is a no-op

    other.acquire(timeout=5)  # the table lock really was given up
    assert other.is_held() and not lock.is_held()
    other.release()


def test_context_manager_holds_inside_and_releases_after(bench: LockBench) -> None:
    lock, other = bench.new_lock(), bench.new_lock()
    with lock as held:
        assert held is lock and lock.is_held()
        assert isinstance(in_thread(lambda: other.acquire(timeout=0.2)), LockTimeout)
    assert not lock.is_held()

    with pytest.raises(RuntimeError, match="boom"), lock:
        raise RuntimeError("boom")
    assert not lock.is_held()
    assert in_thread(lambda: (other.acquire(timeout=5), other.release())) is None


def test_a_held_lock_times_out_contenders_within_the_timeout(bench: LockBench) -> None:
    holder = bench.new_lock()
    holder.acquire()
    contender = bench.new_lock()
    impatient = bench.new_lock(acquire_timeout_s=0.3)  # the provider default applies to acquire()

    for attempt, timeout in ((lambda: contender.acquire(timeout=0.6)), 0.6), (impatient.acquire, 0.3):
        started = time.monotonic()
        error = in_thread(attempt)
        elapsed = time.monotonic() - started
        assert isinstance(error, LockTimeout), error
        assert timeout * 0.9 <= elapsed < timeout + 1.5
        assert "retry" in str(error)
    assert holder.is_held() and not contender.is_held()
    holder.release()


@pytest.mark.parametrize("sharing", ["one lock object per thread", "one lock object for all"])
def test_threads_never_hold_it_together(bench: LockBench, sharing: str) -> None:
    threads, rounds = 6, 10
    shared = bench.new_lock()
    counter = [0]
    failures: list[BaseException] = []

    def work() -> None:
        lock = shared if sharing.endswith("for all") else bench.new_lock()
        try:
            for _ in range(rounds):
                with lock:
                    assert lock.is_held()
                    value = counter[0]
                    time.sleep(0.002)  # without the lock, other threads increment meanwhile and are lost
                    counter[0] = value + 1
        except BaseException as exc:
            failures.append(exc)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not failures, failures
    assert counter[0] == threads * rounds


def test_the_holding_thread_cannot_acquire_it_again(bench: LockBench) -> None:
    lock = bench.new_lock()
    lock.acquire()
    started = time.monotonic()
    with pytest.raises(LockAlreadyHeld, match="not reentrant"):
        lock.acquire(timeout=5)
    assert time.monotonic() - started < 1.0  # refused at once, not after a timeout
    assert lock.is_held()
    lock.release()
    assert not lock.is_held()
    with lock:  # and the refusal left nothing behind
        assert lock.is_held()


def test_processes_never_hold_it_together(cross_process_bench: LockBench, tmp_path: Path) -> None:
    processes, rounds = 3, 20
    counter, go = tmp_path / "counter", tmp_path / "go"
    counter.write_text("0")
    command = [sys.executable, "-m", "tests.lakecore.concurrency.locks.lock_worker", "count",
               cross_process_bench.worker_options(), cross_process_bench.storage.uri, str(counter),
               str(rounds), str(go)]
    workers = [subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True) for _ in range(processes)]
    try:
        for worker in workers:
            assert worker.stdout is not None
            assert worker.stdout.readline().strip() == "ready", worker.communicate(timeout=30)
        go.touch()  # all contend at once
        for worker in workers:
            _, err = worker.communicate(timeout=60)
            assert worker.returncode == 0, err
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
            worker.communicate()  # reaps it and closes its pipes
    assert int(counter.read_text()) == processes * rounds
