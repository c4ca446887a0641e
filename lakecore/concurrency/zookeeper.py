"""The kazoo client plumbing: the only module besides `zookeeper_lock.py` that imports kazoo.

Owns a cache of started kazoo clients per (connect string, session timeout), the mapping of keys (table
URIs, `partition/fileId` pairs) to znode names, and the bounded calls the writer registry makes
(ephemeral nodes, child watches). Knows nothing of locks beyond raising `LockUnavailable` when
ZooKeeper does not answer; the lock itself is `zookeeper_lock.py`.

No call waits unbounded: kazoo queues requests while it reconnects and waits for them without a
deadline, so every call here has a timeout.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import quote

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from lakecore.concurrency.locks import LockUnavailable
from lakecore.errors import InvalidTableConfig

log = logging.getLogger(__name__)

# Reconnection after ZooKeeper comes back should take about a second, not kazoo's default of up to an hour.
_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0}
_COMMAND_RETRY = {"max_tries": 3, "delay": 0.05, "backoff": 2, "max_delay": 1.0}
_MAX_NAME = 200


class Connection(Protocol):
    """Where a client connects and how long it waits (a ZooKeeperLockConfig is one)."""

    @property
    def connect(self) -> str: ...
    @property
    def session_timeout_s(self) -> float: ...
    @property
    def connection_timeout_s(self) -> float: ...


def check_connect(connect: str) -> None:
    hosts = connect.split("/", 1)[0]
    for host in hosts.split(","):
        name, _, port = host.strip().rpartition(":")
        if not host.strip() or (name and not port.isdigit()):
            raise InvalidTableConfig(f"ZooKeeper connect string {connect!r} is malformed; use "
                                     "'host:2181[,host2:2181][/chroot]'")


def table_lock_key(table_uri: str) -> str:
    """A readable, safe key for a table: the tail of its URI as a slug plus a short hash of all of it."""
    uri = table_uri.rstrip("/")
    slug = re.sub(r"[^A-Za-z0-9]+", "-", uri.split("://", 1)[-1]).strip("-")[-48:].lstrip("-")
    return f"{slug or 'table'}-{hashlib.sha256(uri.encode()).hexdigest()[:12]}"


def znode_name(key: str) -> str:
    """One znode name per key, injectively: '/', '%' and other unsafe characters are %-escaped
    ("dt=2026-11-22/0007" -> "dt=2026-11-22%2F0007"); over-long keys become slug~hash ('~' appears
    in no escaped name, so the two forms never collide)."""
    name = quote(key, safe="=").replace("~", "%7E")
    if name in (".", ".."):
        name = name.replace(".", "%2E")
    if len(name) <= _MAX_NAME:
        return name
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "-", key)[:80]
    return f"{slug}~{hashlib.sha256(key.encode()).hexdigest()[:16]}"


class ZooKeeperClients:
    """Started kazoo clients, one per (connect string, session timeout); kazoo clients are thread-safe.

    `shared_clients` is the process-wide instance. A client that cannot (re)connect within the
    connection timeout is stopped and dropped rather than left retrying in the background; its
    sessions' locks were lost already (their holders saw SUSPENDED).
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._clients: dict[tuple[str, float], Any] = {}
        self._pid = os.getpid()

    def client(self, config: Connection) -> Any:
        """A connected client for `config`; LockUnavailable within `config.connection_timeout_s`."""
        key = (config.connect, config.session_timeout_s)
        with self._guard:
            if self._pid != os.getpid():  # forked: the parent's clients are not ours to use or stop
                self._clients, self._pid = {}, os.getpid()
            client = self._clients.get(key)
            if client is None:
                try:
                    client = KazooClient(hosts=config.connect, timeout=config.session_timeout_s,
                                         connection_retry=dict(_CONNECTION_RETRY),
                                         command_retry=dict(_COMMAND_RETRY))
                except (ValueError, KazooException) as exc:
                    raise InvalidTableConfig(f"ZooKeeper connect string {config.connect!r} is invalid "
                                             f"({exc}); use 'host:2181[,host2:2181]'") from exc
                client.start_async()
                self._clients[key] = client
        if wait_connected(client, config.connection_timeout_s):
            return client
        with self._guard:
            dropped = not client.connected and self._clients.get(key) is client
            if dropped:
                del self._clients[key]
        if dropped:
            _stop(client)
        raise LockUnavailable(
            f"cannot reach ZooKeeper at {config.connect} within {config.connection_timeout_s:.1f}s: check "
            f"that ZooKeeper is running there and that the lock connect string {config.connect!r} names "
            "its host:port")

    def __contains__(self, connect: object) -> bool:
        """Whether a client for this connect string is cached (started, connected or reconnecting)."""
        with self._guard:
            return any(c == connect for c, _ in self._clients)

    def close(self) -> None:
        """Stop every client; their sessions end, which frees any lock still held through them."""
        with self._guard:
            clients, self._clients = list(self._clients.values()), {}
            mine = self._pid == os.getpid()
        if mine:
            for client in clients:
                _stop(client)


shared_clients = ZooKeeperClients()


def close_shared_clients() -> None:
    shared_clients.close()


def wait_connected(client: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not client.connected:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(0.02, left))
    return True


def _stop(client: Any) -> None:
    try:
        client.stop()
        client.close()
    except Exception as exc:  # already stopped, or its connection thread is gone: nothing left to free
        log.debug("stopping a kazoo client: %s", exc)


def session_of(client: Any) -> int | None:
    client_id = client.client_id
    return int(client_id[0]) if client_id else None


def forget(client: Any, path: str) -> None:
    """Delete a node whenever the client can: kazoo queues the request while it reconnects."""
    try:
        client.delete_async(path)
    except Exception as exc:  # the client is closed: its session, and so the node, is going away anyway
        log.debug("deleting %s later failed: %s", path, exc)


# -- ephemeral nodes and child watches: the writer registry (lakecore.concurrency.writers) ---------
# Each call answers within `timeout` or raises LockUnavailable (this module's "ZooKeeper did not
# answer"); the registry translates that into its own error.


def _unreachable(doing: str, exc: BaseException) -> LockUnavailable:
    return LockUnavailable(f"ZooKeeper did not answer while {doing} ({type(exc).__name__}: {exc}); check "
                           "that ZooKeeper is running and reachable, then retry")


def create_ephemeral(client: Any, path: str, data: bytes, timeout: float) -> bool:
    """Create `path` holding `data` as an ephemeral node of the client's session (missing parents are
    created as persistent nodes); False when the node exists already."""
    try:
        client.create_async(path, data, ephemeral=True, makepath=True).get(timeout=timeout)
    except NodeExistsError:
        return False
    except KazooTimeoutError as exc:
        forget(client, path)  # the create is still queued; the delete is queued after it
        raise _unreachable(f"creating {path}", exc) from exc
    except KazooException as exc:
        raise _unreachable(f"creating {path}", exc) from exc
    return True


def delete_node(client: Any, path: str, timeout: float) -> None:
    """Delete `path`; a missing node is fine. When ZooKeeper does not answer in time the delete stays
    queued (an ephemeral node goes with its session anyway). Never raises."""
    try:
        client.delete_async(path).get(timeout=timeout)
    except NoNodeError:
        pass
    except KazooTimeoutError:
        pass  # still queued
    except Exception:
        forget(client, path)


def children_data(client: Any, path: str, timeout: float) -> dict[str, bytes]:
    """Each child of `path` with its data; {} when `path` does not exist. Children that go away while
    being read are left out."""
    deadline = time.monotonic() + timeout
    try:
        names = client.get_children_async(path).get(timeout=timeout)
    except NoNodeError:
        return {}
    except (KazooException, KazooTimeoutError) as exc:
        raise _unreachable(f"listing {path}", exc) from exc
    pending = [(name, client.get_async(f"{path}/{name}")) for name in names]
    found: dict[str, bytes] = {}
    for name, result in pending:
        try:
            data, _ = result.get(timeout=max(0.0, deadline - time.monotonic()))
        except NoNodeError:
            continue
        except (KazooException, KazooTimeoutError) as exc:
            raise _unreachable(f"reading {path}/{name}", exc) from exc
        found[name] = bytes(data or b"")
    return found


def watch_children(client: Any, path: str, callback: Callable[[list[str]], bool], timeout: float) -> None:
    """Call `callback(children)` now and after every change of `path`'s children (kazoo's ChildrenWatch,
    which re-lists after a reconnect or a new session), until it returns False. `path` is created
    (persistent) when missing. Later calls run on kazoo's event thread: the callback must not block."""
    try:
        client.ensure_path_async(path).get(timeout=timeout)
    except (KazooException, KazooTimeoutError) as exc:
        raise _unreachable(f"creating {path}", exc) from exc
    first = threading.Event()
    done = threading.Event()
    failed: list[BaseException] = []

    def call(children: list[str]) -> bool:
        first.set()
        return callback(children)

    def establish() -> None:  # ChildrenWatch lists synchronously, without a deadline: keep it off our thread
        try:
            client.ChildrenWatch(path, call)
        except BaseException as exc:
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=establish, name="weir-zookeeper-watch", daemon=True).start()
    if not done.wait(timeout):
        raise _unreachable(f"watching {path}", TimeoutError(f"no answer within {timeout:.1f}s"))
    if failed:
        raise _unreachable(f"watching {path}", failed[0]) from failed[0]
    if not first.is_set():  # kazoo stops a watch silently when the node vanished before listing it
        raise _unreachable(f"watching {path}", NoNodeError(f"{path} was deleted meanwhile"))


# -- persistent flags and data watches: abort flags (lakecore.concurrency.aborts) -------------------


def create_persistent(client: Any, path: str, data: bytes, timeout: float) -> bool:
    """Create `path` holding `data` as a persistent node (missing parents too); False when it exists
    already. LockUnavailable when ZooKeeper does not answer within `timeout` (the create may still
    land later: creating again is how to find out)."""
    try:
        client.create_async(path, data, makepath=True).get(timeout=timeout)
    except NodeExistsError:
        return False
    except (KazooException, KazooTimeoutError) as exc:
        raise _unreachable(f"creating {path}", exc) from exc
    return True


def child_names(client: Any, path: str, timeout: float) -> list[str]:
    """The children of `path`; [] when it does not exist."""
    try:
        return list(client.get_children_async(path).get(timeout=timeout))
    except NoNodeError:
        return []
    except (KazooException, KazooTimeoutError) as exc:
        raise _unreachable(f"listing {path}", exc) from exc


def watch_data(client: Any, path: str, callback: Callable[[bytes | None], None],
               timeout: float) -> Callable[[], None]:
    """Call `callback(data)` now and after every change of the node at `path` (None while it does not
    exist), through kazoo's DataWatch, which re-reads after a reconnect or a new session. Returns
    `stop()`: no call after it returns (a call in progress may finish). Calls run on kazoo's event
    thread: the callback must not block."""
    stopped = threading.Event()
    done = threading.Event()
    made: list[Any] = []
    failed: list[BaseException] = []
    target = [callback]  # emptied by stop(): what kazoo keeps of a stopped watch must not hold the caller

    def call(data: bytes | None, stat: Any, event: Any = None) -> bool:  # takes 3: kazoo retries on TypeError
        for fn in list(target):
            fn(None if stat is None else bytes(data or b""))
        return bool(target) and not stopped.is_set()

    def establish() -> None:  # DataWatch reads synchronously, retrying without a deadline: not on our thread
        try:
            watch = client.DataWatch(path, call)
            made.append(watch)
            if stopped.is_set():
                _end_data_watch(client, watch)
        except BaseException as exc:
            failed.append(exc)
        finally:
            done.set()

    def stop() -> None:
        stopped.set()
        target.clear()
        for watch in made:
            _end_data_watch(client, watch)

    threading.Thread(target=establish, name="weir-zookeeper-data-watch", daemon=True).start()
    if not done.wait(timeout):
        stop()  # a watch established late ends at once
        raise _unreachable(f"watching {path}", TimeoutError(f"no answer within {timeout:.1f}s"))
    if failed:
        raise _unreachable(f"watching {path}", failed[0]) from failed[0]
    return stop


def _end_data_watch(client: Any, watch: Any) -> None:
    """End a DataWatch now rather than at its next event (for a flag that is never raised, never):
    kazoo keeps each unended one's session listener (re-reading its node at every reconnect) and its
    one-shot watcher until the node changes. Kazoo has no public way to do this; its private names
    are looked up defensively, and the watch ends at its next call anyway."""
    watch._stopped = True  # kazoo's own flag for a watch whose function returned False
    try:
        client.remove_listener(watch._session_watcher)
        watchers = client._data_watchers.get(watch._path)
        if watchers is not None:
            watchers.discard(watch._watcher)
    except (AttributeError, ValueError, KeyError, TypeError) as exc:  # another kazoo version: it ends later
        log.debug("ending a data watch: %s", exc)
