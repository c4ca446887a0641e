"""Every table lock keeps how long its holder waited for it and held it (the last time and in total),
what a writer registers and the operator reports per writer (status.currentInstantLock)."""

from __future__ import annotations

import threading
import time

from lakecore.concurrency.locks.in_process import InProcessLock
from lakecore.concurrency.locks.protocol import lock_times


def test_the_waiter_waited_at_least_until_the_holder_let_go_and_the_holder_held_that_long() -> None:
    holder, waiter = InProcessLock("table-a"), InProcessLock("table-a")   # two writers, one table
    holder.acquire()
    acquired_at = time.monotonic()
    started = threading.Event()
    marks: dict[str, float] = {}

    def wait() -> None:
        marks["asked"] = time.monotonic()
        started.set()
        with waiter:
            pass

    thread = threading.Thread(target=wait)
    thread.start()
    started.wait()
    time.sleep(0.05)
    marks["released"] = time.monotonic()
    holder.release()
    thread.join()
    held, waited = lock_times(holder), lock_times(waiter)
    assert held is not None and waited is not None
    assert held.last_hold_s >= marks["released"] - acquired_at
    assert waited.last_wait_s >= marks["released"] - marks["asked"]
    assert (held.acquired, waited.acquired) == (1, 1)
    assert waited.as_ms()["lock_wait_ms"] >= 50 and set(waited.as_ms()) == {"lock_wait_ms", "lock_hold_ms"}
    holder.acquire()
    holder.release()
    assert held.acquired == 2 and held.total_hold_s >= held.last_hold_s
