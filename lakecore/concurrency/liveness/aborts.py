"""Aborts decided outside a writer: the abort flags in ZooKeeper, and how a running writer hears of them.

Owns the flag node `<base_path>/<znode_name(table_lock_key(table URI))>/<instant time>` (persistent,
holding the proof-of-death record as JSON) that the operator raises right after writing the proof of
death on storage (`mark_aborted`), the flags' housekeeping, and `AbortWatch`: a writer's watch that
calls back once when someone else aborted its instant — at once through a ZooKeeper data watch on
the flag, and in any case by polling the proof of death on storage every `check_s`.

Must not fence anything: the proof of death on storage, checked by the commit under the table lock,
is what makes an aborted instant never complete; the flag and the watch only make the writer stop
promptly instead of at its commit. Kazoo-free: ZooKeeper calls are in `concurrency/zookeeper`, imported only
when a connect string is given.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Collection, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from lakecore.concurrency.liveness.heartbeat import is_aborted, read_aborted
from lakecore.concurrency.liveness.writers import decode_info
from lakecore.errors import AbortFlagUnavailable, InvalidTableConfig
from lakecore.storage import Storage

if TYPE_CHECKING:
    from lakecore.concurrency.zookeeper import Connection

ABORTS_PATH = "/weir/aborts"
Record = dict[str, Any]
OnAbort = Callable[[Record], None]

log = logging.getLogger(__name__)


# -- the flags -----------------------------------------------------------------------------------


def abort_flag_path(table_uri: str, base_path: str = ABORTS_PATH) -> str:
    """The znode under which a table's abort flags live (one child per aborted instant)."""
    from lakecore.concurrency.zookeeper import table_lock_key, znode_name

    return f"{base_path.rstrip('/')}/{znode_name(table_lock_key(table_uri))}"


def instant_flag_path(table_uri: str, instant_time: str, base_path: str = ABORTS_PATH) -> str:
    """The abort flag of one instant."""
    return f"{abort_flag_path(table_uri, base_path)}/{instant_time}"


def raise_abort_flag(connect: str | Connection, table_uri: str, instant_time: str, record: Mapping[str, Any],
                     *, base_path: str = ABORTS_PATH, timeout_s: float = 10.0) -> bool:
    """Raise the instant's abort flag (a persistent node holding `record` as JSON) so that its writer
    stops at once; write the proof of death on storage first (`mark_aborted`): that is what fences.
    Idempotent: True when this call created the flag, False when it was raised already.
    AbortFlagUnavailable when ZooKeeper does not answer within `timeout_s`."""
    from lakecore.concurrency.zookeeper import create_persistent, ensure_shared_base

    try:
        data = json.dumps(dict(record), sort_keys=True).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise TypeError(f"an abort record must be JSON-serializable ({exc}); pass strings, numbers, lists "
                        "and dicts") from exc
    path = instant_flag_path(table_uri, instant_time, base_path)

    def create(client: Any) -> bool:
        ensure_shared_base(client, base_path, timeout_s)   # every tenant's flags live under it
        return create_persistent(client, path, data, timeout_s)

    return _call(connect, timeout_s, f"raising the abort flag {path}", create)


def abort_flags(connect: str | Connection, table_uri: str, *, base_path: str = ABORTS_PATH,
                timeout_s: float = 10.0) -> list[str]:
    """The instants whose abort flag is raised on the table, sorted."""
    from lakecore.concurrency.zookeeper import child_names

    path = abort_flag_path(table_uri, base_path)
    names = _call(connect, timeout_s, f"listing {path}", lambda client: child_names(client, path, timeout_s))
    return sorted(names)


def clear_abort_flags(connect: str | Connection, table_uri: str, keep: Collection[str], *,
                      base_path: str = ABORTS_PATH, timeout_s: float = 10.0) -> list[str]:
    """Delete the table's abort flags except those of `keep` (the instants still pending: their
    writers may not have heard yet). Returns the instants whose flags were deleted. Housekeeping only:
    a deleted flag never revives a writer, its proof of death on storage stands."""
    from lakecore.concurrency.zookeeper import child_names, delete_node

    path = abort_flag_path(table_uri, base_path)

    def clear(client: Any) -> list[str]:
        gone = sorted(set(child_names(client, path, timeout_s)) - set(keep))
        for name in gone:
            delete_node(client, f"{path}/{name}", timeout_s)
        return gone

    return _call(connect, timeout_s, f"clearing flags under {path}", clear)


def decode_record(data: bytes) -> Record:
    """A flag's record; {} when garbled (the flag alone says the instant is aborted)."""
    return decode_info(data)


def _connection(connect: str | Connection, timeout_s: float) -> Connection:
    if not isinstance(connect, str):
        return connect
    from lakecore.concurrency.locks.zookeeper import ZooKeeperLockConfig

    # the client cache takes a lock config: same session timeout as the table lock's, so one client
    return ZooKeeperLockConfig(connect, "aborts", connection_timeout_s=timeout_s)


def _client(connect: str | Connection, timeout_s: float, doing: str) -> Any:
    from lakecore.concurrency.zookeeper import shared_clients
    from lakecore.errors import LockUnavailable

    connection = _connection(connect, timeout_s)
    try:
        return shared_clients.client(connection)
    except LockUnavailable as exc:
        raise AbortFlagUnavailable(f"{doing} failed: {exc}") from exc


def _call(connect: str | Connection, timeout_s: float, doing: str, fn: Callable[[Any], Any]) -> Any:
    from lakecore.errors import LockUnavailable

    client = _client(connect, timeout_s, doing)
    try:
        return fn(client)
    except LockUnavailable as exc:
        raise AbortFlagUnavailable(f"{doing} failed: {exc}") from exc


# -- the writer's watch ----------------------------------------------------------------------------


class AbortWatch:
    """Calls `on_abort(record)` once, from a thread of its own, when the instant is aborted by someone
    else: when its abort flag appears in ZooKeeper (with `zookeeper`, a connect string) or, checked
    every `check_s`, its proof of death on storage (always: a writer whose ZooKeeper watch is late or
    lost still hears within a period). `record` is the flag's or the proof's JSON ({} if garbled).
    The flag is looked for under `table_uri` (default: the storage's URI, as the writer registry and
    the table's lock key it).

    The writer closes the watch before it aborts by itself (its own proof of death is no news) and
    once its instant completed. After close() the callback is never called (a call in progress may
    finish)."""

    def __init__(self, storage: Storage, instant_time: str, on_abort: OnAbort, *,
                 table_uri: str | None = None, check_s: float = 1.0,
                 zookeeper: str | Connection | None = None, base_path: str = ABORTS_PATH,
                 timeout_s: float = 10.0) -> None:
        if not check_s > 0:
            raise InvalidTableConfig(f"the abort check period must be > 0 seconds, got {check_s!r}")
        self.storage, self.instant_time, self.check_s = storage, instant_time, check_s
        self.table_uri = storage.uri if table_uri is None else table_uri  # what the flag's path is keyed by
        self.zookeeper, self.base_path, self.timeout_s = zookeeper, base_path, timeout_s
        self.record: Record | None = None  # once fired
        self._on_abort = on_abort
        self._guard = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._flag: Record | None = None
        self._stop_flag_watch: Callable[[], None] | None = None
        self._thread: threading.Thread | None = None
        self._failing = False

    def start(self) -> Self:
        """Begin watching. A ZooKeeper that does not answer leaves the storage check alone (logged);
        a malformed connect string raises InvalidTableConfig."""
        self._thread = threading.Thread(target=self._run, name=f"weir-abort-watch-{self.instant_time}",
                                        daemon=True)
        self._thread.start()
        if self.zookeeper is not None:
            self._watch_flag(self.zookeeper)
        return self

    @property
    def fired(self) -> bool:
        return self.record is not None

    def close(self) -> None:
        with self._guard:
            self._closed = True
            stop, self._stop_flag_watch = self._stop_flag_watch, None
        self._wake.set()
        if stop is not None:
            stop()  # no join: the thread ends at its next wake-up and calls nothing once closed

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- the two sources -----------------------------------------------------------------------

    def _watch_flag(self, connect: str | Connection) -> None:
        from lakecore.concurrency.zookeeper import watch_data

        path = instant_flag_path(self.table_uri, self.instant_time, self.base_path)
        try:
            stop: Callable[[], None] | None = _call(
                connect, self.timeout_s, f"watching the abort flag {path}",
                lambda client: watch_data(client, path, self._flag_changed, self.timeout_s))
        except AbortFlagUnavailable as exc:
            log.warning("cannot watch the abort flag of write %s (%s); it hears of an abort from the "
                        "storage check every %gs instead", self.instant_time, exc, self.check_s)
            return
        with self._guard:
            if not self._closed:
                self._stop_flag_watch, stop = stop, None
        if stop is not None:  # closed meanwhile
            stop()

    def _flag_changed(self, data: bytes | None) -> None:  # on kazoo's event thread: hand over, never block
        if data is None:
            return
        self._flag = decode_record(data)
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.check_s)
            self._wake.clear()
            if self._closed:
                return
            record = self._flag if self._flag is not None else self._check_storage()
            if record is not None:
                self._fire(record)
                return

    def _check_storage(self) -> Record | None:
        try:
            if not is_aborted(self.storage, self.instant_time):  # one exists call per period
                found = None
            else:
                found = read_aborted(self.storage, self.instant_time)
        except Exception as exc:  # storage hiccup: the next period looks again; the commit fences anyway
            if not self._failing:
                log.warning("checking whether write %s was aborted failed (%s: %s); retrying every %gs",
                            self.instant_time, type(exc).__name__, exc, self.check_s)
            self._failing = True
            return None
        self._failing = False
        return found

    def _fire(self, record: Record) -> None:
        with self._guard:
            if self._closed or self.record is not None:
                return
            self.record = record
            stop, self._stop_flag_watch = self._stop_flag_watch, None
        if stop is not None:
            stop()
        try:
            self._on_abort(record)
        except Exception:
            log.exception("the abort callback of write %s failed", self.instant_time)
