"""Table locks: the protocol every provider implements and what the providers share (their errors are
in lakecore.errors).

A lock guards the short critical sections of a table: drawing instant times and completing instants.
The providers live one per module of this package and import this one, never each other:
`in_process.py` (threads of one process), `storage.py` (generation files on the table's storage),
`zookeeper.py` (kazoo's Lock recipe; the kazoo client plumbing is `concurrency/zookeeper`).
`choice.py` picks one from options or from the provider a table records in table.json.

Every lock is not reentrant (acquiring again from the holding thread raises `LockAlreadyHeld`
instead of deadlocking) and may be shared by threads: they queue on the object before contending for
the table. Not here: deciding what the lock protects (concurrency/transaction.py) or retrying a whole
commit.
"""

from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, Self

from lakecore.config import LockSpec
from lakecore.errors import InvalidTableConfig, LockAlreadyHeld, LockError, LockTimeout


class Lock(Protocol):
    def acquire(self, timeout: float | None = None) -> None:
        """Block until held; raise LockTimeout after `timeout` seconds (None: the provider default)."""
        ...

    def release(self) -> None:
        """Give the lock up; a no-op when not held, and never raises because the lock was lost."""
        ...

    def is_held(self) -> bool:
        """Whether this holder still owns the lock (checked right before completing an instant)."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None: ...


def spec_of(lock: object) -> LockSpec | None:
    """Which table lock `lock` is (its `spec` attribute), or None for a lock that does not say."""
    spec = getattr(lock, "spec", None)
    return spec if isinstance(spec, LockSpec) else None


def backoff_s(attempt: int, *, initial_s: float, cap_s: float) -> float:
    """Capped exponential backoff with jitter (x0.5..x1.5) for the `attempt`-th wait, counting from 0."""
    return min(cap_s, initial_s * 2.0 ** min(attempt, 30)) * (0.5 + random.random())


@dataclass
class LockTimes:
    """How long this holder waited for the table lock and held it: the last time and in total.
    Written by the holding thread only; read by anyone (a supervisor's report)."""

    last_wait_s: float = 0.0
    last_hold_s: float = 0.0
    total_wait_s: float = 0.0
    total_hold_s: float = 0.0
    acquired: int = 0

    def as_ms(self) -> dict[str, int]:
        """The last wait and hold, as a writer registers them (milliseconds)."""
        return {"lock_wait_ms": round(self.last_wait_s * 1000),
                "lock_hold_ms": round(self.last_hold_s * 1000)}


def lock_times(lock: object) -> LockTimes | None:
    """The times of a lock that keeps them (every provider's; a wrapper forwards its inner lock's)."""
    times = getattr(lock, "times", None)
    return times if isinstance(times, LockTimes) else None


class GuardedLock:
    """Shared by every provider: the context manager, the default timeout, and the thread guard.

    A thread first takes the object's own mutex, then the table lock (`_take`). So threads sharing one
    lock object queue here, and the holding thread acquiring again is refused rather than deadlocked.
    """

    def __init__(self, default_timeout: float) -> None:
        if not 0 <= default_timeout < math.inf:
            raise InvalidTableConfig(f"lock timeout must be >= 0 seconds and finite, got {default_timeout}")
        self._default = default_timeout
        self._mutex = threading.Lock()
        self._release_guard = threading.Lock()
        self._holder: int | None = None
        self.times = LockTimes()
        self._held_since = 0.0

    def describe(self) -> str:
        raise NotImplementedError

    def _take(self, deadline: float, timeout: float) -> None:
        """Acquire the table lock before `deadline` (time.monotonic) or raise a LockError."""
        raise NotImplementedError

    def _give(self) -> None:
        """Give the table lock up; must not raise because the lock was lost."""
        raise NotImplementedError

    def _still_held(self) -> bool:
        return True

    def acquire(self, timeout: float | None = None) -> None:
        t = self._default if timeout is None else min(max(0.0, timeout), threading.TIMEOUT_MAX)
        started = time.monotonic()
        deadline = started + t
        if self._holder == threading.get_ident():
            raise LockAlreadyHeld(f"{self.describe()} is already held by this thread and locks are not "
                                  "reentrant: release it before acquiring it again")
        if not self._mutex.acquire(timeout=t):
            raise LockTimeout(f"{self.describe()} not acquired in {t:.1f}s: another thread of this process "
                              "holds it through the same lock object; retry later")
        try:
            self._take(deadline, t)
        except BaseException:
            self._mutex.release()
            raise
        self._holder = threading.get_ident()
        self._held_since = time.monotonic()
        waited = self._held_since - started
        self.times.last_wait_s, self.times.total_wait_s = waited, self.times.total_wait_s + waited
        self.times.acquired += 1

    def release(self) -> None:
        with self._release_guard:
            if self._holder is None:
                return
            self._holder = None
            held = time.monotonic() - self._held_since
            self.times.last_hold_s, self.times.total_hold_s = held, self.times.total_hold_s + held
            try:
                self._give()
            finally:
                self._mutex.release()

    def is_held(self) -> bool:
        return self._holder is not None and self._still_held()

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def ensure_held(lock: Lock, what: str) -> None:
    if not lock.is_held():
        raise LockError(f"lost the table lock before {what}; nothing was completed: retry the write")
