"""Choosing a table's lock: from table options, from the provider the table records in table.json,
and refusing a lock that is not the recorded one.

`TableLock` is the lock a `Table` hands to its writers and services: the recorded provider's lock,
which after every acquire checks that the table still records it. So a writer that opened the table
before `Table.set_lock_provider` stops at its next critical section instead of serializing on a lock
nobody else takes any more. Providers are imported only when asked for (`zookeeper.py` imports kazoo).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from lakecore.concurrency.locks.in_process import InProcessLock
from lakecore.concurrency.locks.protocol import Lock, LockTimes, lock_times
from lakecore.concurrency.locks.storage import StorageLock
from lakecore.config import LockSpec
from lakecore.errors import InvalidTableConfig, LockProviderChanged, LockProviderMismatch
from lakecore.storage import Storage

if TYPE_CHECKING:
    from lakecore.concurrency.locks.zookeeper import ZooKeeperLock

PROVIDERS = ("zookeeper", "storage", "in_process")
LOCK_OPTIONS = frozenset({"provider", "connect", "base_path", "key", "path", "session_timeout_s",
                          "connection_timeout_s", "acquire_timeout_s", "acquire_retries", "expiry_s",
                          "credentials"})
HOW_TO_CHANGE = ("to change the table's lock, stop its writers and run `weir table set-lock` "
                 "(Table.set_lock_provider)")


def lock_from_options(storage: Storage, options: Mapping[str, Any]) -> Lock:
    """The table lock the options ask for (default provider: 'storage'); keys as in LOCK_OPTIONS.

    zookeeper needs `connect` ("host:port[,host:port]"); its znode is `path`, else one derived from
    `key` (default: from the table URI). Options meant for another provider are ignored; unknown ones
    are refused.
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


def lock_for_spec(storage: Storage, spec: LockSpec, options: Mapping[str, Any] | None = None) -> Lock:
    """The lock `spec` names on this table; `options` tune it (timeouts), never choose another one."""
    chosen = {k: v for k, v in (options or {}).items() if k not in ("provider", "connect", "path", "key")}
    chosen["provider"] = spec.provider
    if spec.provider == "zookeeper":
        chosen["connect"] = spec.connect
        if spec.path:
            chosen["path"] = spec.path
    return lock_from_options(storage, chosen)


def check_lock(recorded: LockSpec, asked: LockSpec | None, table_uri: str) -> None:
    """Raise LockProviderMismatch unless `asked` is the lock the table records."""
    why = "it does not say which table lock it is" if asked is None else recorded.mismatch(asked)
    if why is None:
        return
    if asked is None:
        wanted = "a lock that does not say which table lock it is"
    elif asked.provider == "zookeeper":
        wanted = f"the ZooKeeper lock {asked.path or '(at the table path)'} on {asked.connect}"
    else:
        wanted = asked.describe()
    raise LockProviderMismatch(
        f"table {table_uri} records {recorded.describe()} in table.json, but this writer asked for "
        f"{wanted} ({why}); two locks would let two writers commit at once. Open the table without a "
        f"lock option to use the recorded one, or {HOW_TO_CHANGE}")


class TableLock:
    """A table's recorded lock that checks, after each acquire, that the table still records it."""

    def __init__(self, inner: Lock, spec: LockSpec, recorded: Callable[[], LockSpec], table_uri: str) -> None:
        self.inner = inner
        self.spec = spec
        self._recorded = recorded
        self._uri = table_uri

    def acquire(self, timeout: float | None = None) -> None:
        self.inner.acquire(timeout)
        try:
            now = self._recorded()
        except BaseException:
            self.inner.release()
            raise
        if now.mismatch(self.spec) is not None:
            self.inner.release()
            raise LockProviderChanged(
                f"the lock of table {self._uri} changed to {now.describe()} while this writer used "
                f"{self.spec.describe()}; nothing was completed: open the table again to use the new lock")

    def release(self) -> None:
        self.inner.release()

    def is_held(self) -> bool:
        return self.inner.is_held()

    @property
    def times(self) -> LockTimes | None:
        return lock_times(self.inner)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()
        else:
            self.inner.release()

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"TableLock({self.spec.describe()})"


def _zookeeper_lock(storage: Storage, options: Mapping[str, Any], timeout: float) -> ZooKeeperLock:
    connect = options.get("connect")
    if not isinstance(connect, str) or not connect.strip():
        raise InvalidTableConfig("lock provider 'zookeeper' needs a connect string: set the lock option "
                                 "connect to 'host:2181' (comma-separate the servers of an ensemble)")
    from lakecore.concurrency.locks.zookeeper import ZooKeeperLock, ZooKeeperLockConfig
    from lakecore.concurrency.zookeeper import table_lock_key

    extra: dict[str, Any] = {"acquire_timeout_s": timeout}
    for name in ("session_timeout_s", "connection_timeout_s"):
        if name in options:
            extra[name] = _number(options, name, 0.0)
    if "acquire_retries" in options:
        extra["acquire_retries"] = int(_number(options, "acquire_retries", 0.0))
    for name in ("base_path", "path"):
        if name in options:
            extra[name] = _text(options, name, "")
    if "credentials" in options:  # a zookeeper.Credentials (or None: none), never recorded
        extra["credentials"] = options["credentials"]
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
