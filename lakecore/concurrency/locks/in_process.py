"""The in-process lock: one lock per key (the table URI) shared by the threads of this process.

Enough for a table that a single process writes (with its in-process table services); useless across
processes, so a table records it only when that is what its owner declares (LockSpec 'in_process').
"""

from __future__ import annotations

import threading
import time
import weakref

from lakecore.concurrency.locks.protocol import GuardedLock
from lakecore.config import LockSpec
from lakecore.errors import LockAlreadyHeld, LockTimeout


class _Slot:
    """The in-process lock of one key, and the thread holding it."""

    __slots__ = ("__weakref__", "holder", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holder: int | None = None


# Weak values: a key's slot lives as long as some InProcessLock refers to it (keyed locks come and go).
_slots: weakref.WeakValueDictionary[str, _Slot] = weakref.WeakValueDictionary()
_slots_lock = threading.Lock()


class InProcessLock(GuardedLock):
    """One lock per key (the table URI) within this process: single writer plus in-process services."""

    spec = LockSpec("in_process")

    def __init__(self, key: str, *, default_timeout: float = 60.0) -> None:
        super().__init__(default_timeout)
        with _slots_lock:
            slot = _slots.get(key)
            if slot is None:
                slot = _slots[key] = _Slot()
        self._slot = slot
        self._key = key

    def describe(self) -> str:
        return f"in-process lock of {self._key}"

    def _take(self, deadline: float, timeout: float) -> None:
        me = threading.get_ident()
        if self._slot.holder == me:
            raise LockAlreadyHeld(f"{self.describe()} is already held by this thread through another lock "
                                  "object, and locks are not reentrant: release that one first")
        if not self._slot.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise LockTimeout(f"{self.describe()} not acquired in {timeout:.1f}s: another thread of this "
                              "process holds it; retry later")
        self._slot.holder = me

    def _give(self) -> None:
        self._slot.holder = None
        self._slot.lock.release()
