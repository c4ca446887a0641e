"""Live writers of a table, registered where the operator can watch them without polling storage.

Owns the `WriterRegistry` protocol (register an instant's writer; list and watch a table's live
writers), its ZooKeeper implementation — one ephemeral znode per writer,
`<base_path>/<table key>/<instant time>`, holding JSON info (host, pid, started, operation) — and an
in-memory one for tests of callers. An ephemeral node lives as long as its writer's ZooKeeper session,
so a writer killed with SIGKILL disappears after its session timeout — and so does a live writer cut
off from ZooKeeper for longer than that (its node is not re-created).

Advisory only: whether an in-flight instant may be rolled back is decided by its heartbeat on storage
(`heartbeat.py`), never by this registry. Kazoo-free: the ZooKeeper calls are in `concurrency/zookeeper`,
imported only when a ZooKeeper registry is made, so the in-memory registry works without kazoo.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from lakecore.errors import WriterAlreadyRegistered, WriterRegistryUnavailable
from lakecore.timeline import now_ms
from lakecore.timeline.instant_time import to_epoch_ms

if TYPE_CHECKING:
    from lakecore.concurrency.locks.zookeeper import ZooKeeperLockConfig
    from lakecore.concurrency.zookeeper import Auth, ZooKeeperClients

Info = dict[str, Any]
WatchCallback = Callable[[frozenset[str]], None]
T = TypeVar("T")

log = logging.getLogger(__name__)


# -- values ------------------------------------------------------------------------------------


def writer_info(operation: str, *, clock: Callable[[], int] = now_ms, **extra: Any) -> Info:
    """The info a writer registers: where it runs, since when (epoch ms), what it does, plus `extra`."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": clock(), "operation": operation,
            **extra}


def launch_info(environ: Mapping[str, str] | None = None) -> Info:
    """Who launched this writer, from what the operator sets in its driver pod's environment: `writer`
    (WEIR_WRITER, the LakeWriter's "namespace/name") and `submission` (WEIR_SUBMISSION_ID) when set,
    and `pod` (WEIR_POD_NAME, else the host name)."""
    env = os.environ if environ is None else environ
    info: Info = {"pod": env.get("WEIR_POD_NAME") or socket.gethostname()}
    for key, var in (("writer", "WEIR_WRITER"), ("submission", "WEIR_SUBMISSION_ID")):
        if env.get(var):
            info[key] = env[var]
    return info


def encode_info(info: Mapping[str, Any]) -> bytes:
    try:
        return json.dumps(dict(info), sort_keys=True, separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise TypeError(f"writer info must be JSON-serializable ({exc}); pass strings, numbers, lists "
                        "and dicts") from exc


def decode_info(data: bytes) -> Info:
    """A node's info; {} for a node whose data is not a JSON object (a registry is advisory)."""
    try:
        info = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


class _Handle:
    """Something close() ends, once; a context manager."""

    def __init__(self, end: Callable[[], None]) -> None:
        self._end = end
        self._guard = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._guard:
            if self._closed:
                return
            self._closed = True
        self._end()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class Registration(_Handle):
    """One writer's entry; close() removes it (safe to call twice)."""

    def __init__(self, table_uri: str, instant_time: str, end: Callable[[], None]) -> None:
        super().__init__(end)
        self.table_uri = table_uri
        self.instant_time = instant_time

    def __repr__(self) -> str:
        return f"Registration({self.table_uri!r}, {self.instant_time!r}, closed={self.closed})"


class Watch(_Handle):
    """A running watch; after close() its callback is not called again."""

    def __init__(self, table_uri: str, callback: WatchCallback) -> None:
        super().__init__(lambda: None)
        self.table_uri = table_uri
        self._callback = callback

    def deliver(self, live: frozenset[str]) -> bool:
        """Call the callback unless closed; its errors are logged, never passed to the registry's caller
        (or to ZooKeeper's event thread). False once closed."""
        if self.closed:
            return False
        try:
            self._callback(live)
        except Exception:
            log.exception("writer watch callback for %s failed on %s", self.table_uri, sorted(live))
        return not self.closed


class WriterRegistry(Protocol):
    """Who is writing which instant of a table, right now."""

    def register(self, table_uri: str, instant_time: str, info: Mapping[str, Any]) -> Registration:
        """Announce the writer of `instant_time`; WriterAlreadyRegistered if one is registered."""
        ...

    def live_writers(self, table_uri: str) -> dict[str, Info]:
        """instant time -> info of every registered writer of the table."""
        ...

    def watch(self, table_uri: str, callback: WatchCallback) -> Watch:
        """Call `callback(live instant times)` now and whenever writers join or leave, until closed.
        Calls may come from another thread and may coalesce quick successive changes."""
        ...

    def close(self) -> None: ...


def _check_instant(instant_time: str) -> None:
    to_epoch_ms(instant_time)  # InstantNotFound with a remedy for anything but 17 digits


# -- in memory ---------------------------------------------------------------------------------


class InMemoryWriterRegistry:
    """The registry of one process, for tests of callers. Callbacks run synchronously, in order."""

    def __init__(self) -> None:
        self._guard = threading.RLock()
        self._writers: dict[str, dict[str, Info]] = {}
        self._watches: dict[str, list[Watch]] = {}

    def register(self, table_uri: str, instant_time: str, info: Mapping[str, Any]) -> Registration:
        _check_instant(instant_time)
        stored = decode_info(encode_info(info))  # a copy, of JSON types only, as ZooKeeper would keep
        key = _uri_key(table_uri)
        with self._guard:
            writers = self._writers.setdefault(key, {})
            if instant_time in writers:
                raise WriterAlreadyRegistered(f"a writer of instant {instant_time} of {table_uri} is "
                                              "registered already; close its registration first")
            writers[instant_time] = stored
            self._notify(key)
        return Registration(table_uri, instant_time, lambda: self._leave(key, instant_time))

    def live_writers(self, table_uri: str) -> dict[str, Info]:
        with self._guard:
            return {t: dict(i) for t, i in self._writers.get(_uri_key(table_uri), {}).items()}

    def watch(self, table_uri: str, callback: WatchCallback) -> Watch:
        key = _uri_key(table_uri)
        watch = Watch(table_uri, callback)
        with self._guard:
            self._watches.setdefault(key, []).append(watch)
            watch.deliver(frozenset(self._writers.get(key, {})))
        return watch

    def close(self) -> None:
        with self._guard:
            self._writers.clear()
            for watches in self._watches.values():
                for watch in watches:
                    watch.close()
            self._watches.clear()

    def _leave(self, key: str, instant_time: str) -> None:
        with self._guard:
            if self._writers.get(key, {}).pop(instant_time, None) is not None:
                self._notify(key)

    def _notify(self, key: str) -> None:
        live = frozenset(self._writers.get(key, {}))
        self._watches[key] = [w for w in self._watches.get(key, []) if w.deliver(live)]


def _uri_key(table_uri: str) -> str:
    return table_uri.rstrip("/")


# -- on the table's storage -------------------------------------------------------------------

WRITERS_DIR = ".weir/writers"


class StorageWriterRegistry:
    """Writers as files `<table>/.weir/writers/<instant time>` on the table's own storage, for tables
    without ZooKeeper: what a supervisor reads to tell whose write an instant is. Not ephemeral: a
    killed writer's file stays until the instant is rolled back or `forget_finished` runs; liveness is
    the heartbeat's business anyway. Not watchable: `watch` delivers the current set once."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage

    def register(self, table_uri: str, instant_time: str, info: Mapping[str, Any]) -> Registration:
        from lakecore.errors import AlreadyExists

        _check_instant(instant_time)
        path = f"{WRITERS_DIR}/{instant_time}"
        try:
            self.storage.write_if_absent(path, encode_info(info))
        except AlreadyExists as exc:
            raise WriterAlreadyRegistered(f"a writer of instant {instant_time} of {table_uri} is registered "
                                          f"already ({path})") from exc

        def end() -> None:
            try:
                self.storage.delete(path)
            except Exception as exc:  # a leftover entry of a finished instant is harmless
                log.debug("could not delete %s: %s", path, exc)
        return Registration(table_uri, instant_time, end)

    def live_writers(self, table_uri: str) -> dict[str, Info]:
        found: dict[str, Info] = {}
        for f in self.storage.list_dir(WRITERS_DIR):
            name = f.path.rsplit("/", 1)[-1]
            try:
                found[name] = decode_info(self.storage.read(f.path))
            except FileNotFoundError:
                continue
        return found

    def watch(self, table_uri: str, callback: WatchCallback) -> Watch:
        watch = Watch(table_uri, callback)
        watch.deliver(frozenset(self.live_writers(table_uri)))
        return watch

    def forget_finished(self, pending: set[str]) -> list[str]:
        """Delete the entries of instants no longer pending (their writers died before closing them)."""
        gone = []
        for f in self.storage.list_dir(WRITERS_DIR):
            name = f.path.rsplit("/", 1)[-1]
            if name not in pending:
                self.storage.delete(f.path)
                gone.append(name)
        return gone

    def close(self) -> None:
        pass


# -- on ZooKeeper ------------------------------------------------------------------------------


class ZooKeeperWriterRegistry:
    """Writers as ephemeral znodes `<base_path>/<table key>/<instant time>`; the table key is the lock's
    (`table_lock_key`). With `share_client` (the default) the nodes live in the process-wide kazoo
    session of `(connect, session_timeout_s)`, shared with the ZooKeeper locks."""

    def __init__(self, connect: str, *, base_path: str = "/weir/writers", session_timeout_s: float = 30.0,
                 connection_timeout_s: float | None = None, share_client: bool = True,
                 credentials: Auth = "environment") -> None:
        from lakecore.concurrency.locks.zookeeper import ZooKeeperLockConfig
        from lakecore.concurrency.zookeeper import (
            ZooKeeperClients,
            process_connection_timeout,
            resolve_credentials,
            shared_clients,
        )

        # The client cache takes a lock config; it also validates connect, base_path and the timeouts.
        # `credentials`: this process's WEIR_ZOOKEEPER_USERNAME/PASSWORD by default (concurrency/zookeeper);
        # a refusal is ZooKeeperAccessDenied, not WriterRegistryUnavailable.
        self.settings: ZooKeeperLockConfig = ZooKeeperLockConfig(
            connect, "writers", base_path=base_path, session_timeout_s=session_timeout_s,
            connection_timeout_s=connection_timeout_s if connection_timeout_s is not None
            else process_connection_timeout(), share_client=share_client,
            credentials=resolve_credentials(credentials))
        self._clients: ZooKeeperClients = shared_clients if share_client else ZooKeeperClients()

    def table_path(self, table_uri: str) -> str:
        from lakecore.concurrency.zookeeper import table_lock_key, znode_name

        return f"{self.settings.base_path}/{znode_name(table_lock_key(table_uri))}"

    def register(self, table_uri: str, instant_time: str, info: Mapping[str, Any]) -> Registration:
        from lakecore.concurrency.zookeeper import create_ephemeral, delete_node

        _check_instant(instant_time)
        data = encode_info(info)
        path = f"{self.table_path(table_uri)}/{instant_time}"
        client = self._client()
        timeout = self.settings.connection_timeout_s
        base = self.settings.base_path
        if not self._call(lambda: create_ephemeral(client, path, data, timeout, shared_base=base)):
            raise WriterAlreadyRegistered(
                f"a writer of instant {instant_time} of {table_uri} is registered already ({path} on "
                f"{self.settings.connect}); if that writer died, its node goes away after its ZooKeeper "
                "session times out")
        return Registration(table_uri, instant_time, lambda: delete_node(client, path, timeout))

    def live_writers(self, table_uri: str) -> dict[str, Info]:
        from lakecore.concurrency.zookeeper import children_data

        path = self.table_path(table_uri)
        client = self._client()
        found = self._call(lambda: children_data(client, path, self.settings.connection_timeout_s))
        return {name: decode_info(data) for name, data in found.items()}

    def watch(self, table_uri: str, callback: WatchCallback) -> Watch:
        from lakecore.concurrency.zookeeper import watch_children

        path = self.table_path(table_uri)
        client = self._client()
        watch = Watch(table_uri, callback)
        try:
            self._call(lambda: watch_children(
                client, path, lambda children: watch.deliver(frozenset(children)),
                self.settings.connection_timeout_s, shared_base=self.settings.base_path))
        except BaseException:
            watch.close()  # a watch that shows up late stops at its first call
            raise
        return watch

    def close(self) -> None:
        """Stop this registry's own client (its nodes go with its session); a shared client stays."""
        from lakecore.concurrency.zookeeper import shared_clients

        if self._clients is not shared_clients:
            self._clients.close()

    def _client(self) -> Any:
        return self._call(lambda: self._clients.client(self.settings))

    def _call(self, fn: Callable[[], T]) -> T:
        from lakecore.errors import LockUnavailable

        try:
            return fn()
        except LockUnavailable as exc:
            raise WriterRegistryUnavailable(
                f"the writer registry on ZooKeeper {self.settings.connect} is unavailable: {exc}") from exc
