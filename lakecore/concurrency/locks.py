"""Table locks: the protocol and the providers that need nothing but this process or the storage.

A lock guards the short critical sections of a table: drawing instant times and completing instants.
`InProcessLock` serializes threads of one process; `StorageLock` serializes processes through an
atomically created `<base>/.weir/lock` file that carries its owner and an expiry, so a crashed holder
does not block the table forever. (The ZooKeeper provider lives in its own module.)
"""

from __future__ import annotations

import json
import os
import random
import socket
import threading
import time
import uuid
from types import TracebackType
from typing import Protocol, Self

from lakecore.errors import AlreadyExists, LockError, LockTimeout
from lakecore.storage import Storage


class Lock(Protocol):
    def acquire(self, timeout: float | None = None) -> None:
        """Block until held; raise LockTimeout after `timeout` seconds (None: the provider default)."""
        ...

    def release(self) -> None: ...

    def is_held(self) -> bool:
        """Whether this holder still owns the lock (checked right before completing an instant)."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None: ...


class _ContextLock:
    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def acquire(self, timeout: float | None = None) -> None:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError


_registry: dict[str, threading.Lock] = {}
_registry_lock = threading.Lock()


class InProcessLock(_ContextLock):
    """One lock per table URI within this process (single writer plus in-process services)."""

    def __init__(self, key: str, *, default_timeout: float = 60.0) -> None:
        with _registry_lock:
            self._lock = _registry.setdefault(key, threading.Lock())
        self._key = key
        self._default = default_timeout
        self._held = False

    def acquire(self, timeout: float | None = None) -> None:
        t = self._default if timeout is None else timeout
        if not self._lock.acquire(timeout=t):
            raise LockTimeout(f"in-process lock of {self._key} not acquired in {t:.1f}s; another thread "
                              "of this process holds it: retry later")
        self._held = True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._lock.release()

    def is_held(self) -> bool:
        return self._held


class StorageLock(_ContextLock):
    """A lock file created atomically on the table's storage, with an owner and an expiry."""

    PATH = ".weir/lock"

    def __init__(self, storage: Storage, *, expiry_s: float = 60.0, default_timeout: float = 60.0) -> None:
        self._storage = storage
        self._expiry = expiry_s
        self._default = default_timeout
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._held = False

    def _body(self) -> bytes:
        return json.dumps({"owner": self._owner, "expires": time.time() + self._expiry}).encode()

    def _current(self) -> tuple[bytes, dict[str, object]] | None:
        try:
            raw = self._storage.read(self.PATH)
        except FileNotFoundError:
            return None
        try:
            return raw, dict(json.loads(raw))
        except (ValueError, TypeError):
            return raw, {}

    def acquire(self, timeout: float | None = None) -> None:
        t = self._default if timeout is None else timeout
        deadline = time.monotonic() + t
        delay = 0.002
        while True:
            try:
                self._storage.write_if_absent(self.PATH, self._body())
                self._held = True
                return
            except AlreadyExists:
                pass
            cur = self._current()
            if cur is not None and _expires(cur[1]) < time.time():
                # Break a stale lock only if it is still the same stale file we read.
                again = self._current()
                if again is not None and again[0] == cur[0]:
                    self._storage.delete(self.PATH)
                continue
            if time.monotonic() >= deadline:
                holder = cur[1].get("owner") if cur else "unknown"
                raise LockTimeout(f"lock {self._storage.uri}/{self.PATH} held by {holder} for more than "
                                  f"{t:.1f}s; retry later, or delete the file if that owner is gone")
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.1)

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        cur = self._current()
        if cur is not None and cur[1].get("owner") == self._owner:
            self._storage.delete(self.PATH)

    def is_held(self) -> bool:
        if not self._held:
            return False
        cur = self._current()
        if cur is None or cur[1].get("owner") != self._owner:
            return False
        return _expires(cur[1]) > time.time()


def _expires(body: dict[str, object]) -> float:
    value = body.get("expires", 0)
    return float(value) if isinstance(value, (int, float, str)) else 0.0


def ensure_held(lock: Lock, what: str) -> None:
    if not lock.is_held():
        raise LockError(f"lost the table lock before {what}; nothing was completed: retry the write")
