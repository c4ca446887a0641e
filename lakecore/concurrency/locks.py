"""Table locks: the protocol, the providers that need only this process or the storage, and the choice.

A lock guards the short critical sections of a table: drawing instant times and completing instants.
`InProcessLock` serializes threads of one process; `StorageLock` serializes processes through an
atomically created `<base>/.weir/lock` file that carries its owner and an expiry, so a crashed holder
does not block the table forever. The ZooKeeper provider lives in `zookeeper.py` (the only module that
imports kazoo); `lock_from_options` picks a provider from table options and imports it only when asked.

Every lock here is not reentrant (acquiring again from the holding thread raises `LockAlreadyHeld`
instead of deadlocking) and may be shared by threads: they queue on the object before contending for
the table. Not here: deciding what the lock protects (transaction.py) or retrying a whole commit.
"""

from __future__ import annotations

import json
import math
import os
import random
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self

from lakecore.errors import (
    AlreadyExists,
    AtomicCreateUnsupported,
    InvalidTableConfig,
    LockError,
    LockTimeout,
    StorageError,
)
from lakecore.storage import Storage

if TYPE_CHECKING:
    from lakecore.concurrency.zookeeper import ZooKeeperLock


class LockAlreadyHeld(LockError):
    """The calling thread already holds this lock; locks are not reentrant."""

    retryable = False


class LockUnavailable(LockError):
    """The lock service cannot be reached, or the session holding the lock was lost."""


class LockUnsupported(LockError):
    """The configured lock provider cannot work on this table's storage."""

    retryable = False


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


def backoff_s(attempt: int, *, initial_s: float, cap_s: float) -> float:
    """Capped exponential backoff with jitter (x0.5..x1.5) for the `attempt`-th wait, counting from 0."""
    return min(cap_s, initial_s * 2.0 ** min(attempt, 30)) * (0.5 + random.random())


class _GuardedLock:
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
        deadline = time.monotonic() + t
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

    def release(self) -> None:
        with self._release_guard:
            if self._holder is None:
                return
            self._holder = None
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


class _Slot:
    """The in-process lock of one key, and the thread holding it."""

    __slots__ = ("__weakref__", "holder", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holder: int | None = None


# Weak values: a key's slot lives as long as some InProcessLock refers to it (keyed locks come and go).
_slots: weakref.WeakValueDictionary[str, _Slot] = weakref.WeakValueDictionary()
_slots_lock = threading.Lock()


class InProcessLock(_GuardedLock):
    """One lock per key (the table URI) within this process: single writer plus in-process services."""

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


class StorageLock(_GuardedLock):
    """A lock file created atomically on the table's storage, with an owner and an expiry.

    Needs `write_if_absent` to be atomic; storage that cannot do that is refused at the first acquire
    with `LockUnsupported`. A holder that outlives `expiry_s` loses the lock (`is_held()` turns False),
    and the next contender breaks the stale file, after reading it twice to make sure it is unchanged.
    """

    PATH = ".weir/lock"

    def __init__(self, storage: Storage, *, expiry_s: float = 60.0, default_timeout: float = 60.0,
                 poll_initial_s: float = 0.002, poll_max_s: float = 0.1) -> None:
        super().__init__(default_timeout)
        if expiry_s <= 0:
            raise InvalidTableConfig(f"storage lock expiry must be > 0 seconds, got {expiry_s}")
        self._storage = storage
        self._expiry = expiry_s
        self._poll = (poll_initial_s, poll_max_s)
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._token: str | None = None

    def describe(self) -> str:
        return f"lock file {self._storage.uri}/{self.PATH}"

    def _current(self) -> tuple[bytes, dict[str, object]] | None:
        try:
            raw = self._storage.read(self.PATH)
        except FileNotFoundError:
            return None
        try:
            return raw, dict(json.loads(raw))
        except (ValueError, TypeError):
            return raw, {}

    def _take(self, deadline: float, timeout: float) -> None:
        attempt = 0
        while True:
            token = uuid.uuid4().hex
            body = {"owner": self._owner, "token": token, "expires": time.time() + self._expiry}
            try:
                # not synced: a power loss ends every holder; a damaged file reads as stale
                self._storage.write_if_absent(self.PATH, json.dumps(body).encode(), durable=False)
                self._token = token
                return
            except AlreadyExists:
                pass
            except AtomicCreateUnsupported as exc:
                raise LockUnsupported(
                    f"{self.describe()} needs atomic create-if-absent, which this storage lacks ({exc}); "
                    "configure lock provider 'zookeeper' for this table") from exc
            cur = self._current()
            stale = cur is not None and _expires(cur[1]) < time.time()
            if stale and cur is not None:
                # Break a stale lock only if it is still the same stale file we read.
                again = self._current()
                if again is not None and again[0] == cur[0]:
                    self._storage.delete(self.PATH)
            if time.monotonic() >= deadline:
                holder = cur[1].get("owner", "unknown") if cur else "nobody (it was just released)"
                raise LockTimeout(f"{self.describe()} held by {holder} for more than {timeout:.1f}s; retry "
                                  "later, or delete the file if that owner is gone")
            if stale or cur is None:
                continue  # free (or just freed): try to create it again at once
            time.sleep(min(backoff_s(attempt, initial_s=self._poll[0], cap_s=self._poll[1]),
                           max(0.0, deadline - time.monotonic())))
            attempt += 1

    def _give(self) -> None:
        token, self._token = self._token, None
        cur = self._current()
        if cur is not None and cur[1].get("token") == token:
            self._storage.delete(self.PATH)

    def _still_held(self) -> bool:
        try:
            cur = self._current()
        except (StorageError, OSError):  # cannot tell, so the caller must not act as the holder
            return False
        if cur is None or self._token is None or cur[1].get("token") != self._token:
            return False
        return _expires(cur[1]) > time.time()


def _expires(body: dict[str, object]) -> float:
    value = body.get("expires", 0)
    try:
        return float(value) if isinstance(value, (int, float, str)) else 0.0
    except ValueError:
        return 0.0


def ensure_held(lock: Lock, what: str) -> None:
    if not lock.is_held():
        raise LockError(f"lost the table lock before {what}; nothing was completed: retry the write")


# -- choosing a provider from table options ----------------------------------------------------

PROVIDERS = ("zookeeper", "storage", "in_process")
LOCK_OPTIONS = frozenset({"provider", "connect", "base_path", "key", "session_timeout_s",
                          "connection_timeout_s", "acquire_timeout_s", "acquire_retries", "expiry_s"})


def lock_from_options(storage: Storage, options: Mapping[str, Any]) -> Lock:
    """The table lock the options ask for (default provider: 'storage'); keys as in LOCK_OPTIONS.

    zookeeper needs `connect` ("host:port[,host:port]"); its key defaults to one derived from the
    table URI. Options meant for another provider are ignored; unknown ones are refused.
    """
    unknown = sorted(set(options) - LOCK_OPTIONS)
    if unknown:
        raise InvalidTableConfig(f"unknown lock option(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(sorted(LOCK_OPTIONS))}")
    provider = options.get("provider", "storage")
    timeout = _number(options, "acquire_timeout_s", 60.0)
    if provider == "in_process":
        return InProcessLock(_text(options, "key", storage.uri), default_timeout=timeout)
    if provider == "storage":
        return StorageLock(storage, expiry_s=_number(options, "expiry_s", 60.0), default_timeout=timeout)
    if provider == "zookeeper":
        return _zookeeper_lock(storage, options, timeout)
    raise InvalidTableConfig(f"unknown lock provider {provider!r}; use one of "
                             f"{', '.join(repr(p) for p in PROVIDERS)}")


def _zookeeper_lock(storage: Storage, options: Mapping[str, Any], timeout: float) -> ZooKeeperLock:
    connect = options.get("connect")
    if not isinstance(connect, str) or not connect.strip():
        raise InvalidTableConfig("lock provider 'zookeeper' needs a connect string: set the lock option "
                                 "connect to 'host:2181' (comma-separate the servers of an ensemble)")
    from lakecore.concurrency.zookeeper import ZooKeeperLock, ZooKeeperLockConfig, table_lock_key

    extra: dict[str, Any] = {"acquire_timeout_s": timeout}
    for name in ("session_timeout_s", "connection_timeout_s"):
        if name in options:
            extra[name] = _number(options, name, 0.0)
    if "acquire_retries" in options:
        extra["acquire_retries"] = int(_number(options, "acquire_retries", 0.0))
    if "base_path" in options:
        extra["base_path"] = _text(options, "base_path", "")
    key = _text(options, "key", "") or table_lock_key(storage.uri)
    return ZooKeeperLock(ZooKeeperLockConfig(connect.strip(), key, **extra))


def _number(options: Mapping[str, Any], name: str, default: float) -> float:
    value = options.get(name, default)
    try:
        if isinstance(value, bool):
            raise TypeError
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidTableConfig(f"lock option {name} must be a number, got {value!r}") from None
    if not 0 <= number < math.inf:
        raise InvalidTableConfig(f"lock option {name} must be >= 0 and finite, got {value!r}")
    return number


def _text(options: Mapping[str, Any], name: str, default: str) -> str:
    value = options.get(name, default)
    if not isinstance(value, str):
        raise InvalidTableConfig(f"lock option {name} must be a string, got {value!r}")
    return value
