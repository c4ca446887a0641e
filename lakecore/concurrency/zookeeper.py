"""The ZooKeeper table lock: kazoo's Lock recipe under `<base_path>/<znode name of the key>`.

The only module that imports kazoo. Owns the lock's config, the mapping of keys (table URIs,
`partition/fileId` pairs) to znode names, and a cache of started kazoo clients per connect string.
Must not decide what the lock protects (transaction.py) nor retry whole commits.

Failure behaviour, which is the point of this module:
- ZooKeeper unreachable: `LockUnavailable` within `connection_timeout_s`, naming the connect string.
- Session SUSPENDED or LOST while held: `is_held()` is False from that moment on (a state listener
  flips it; the lock does not come back even if the session does), and `release()` does not raise;
  it deletes the lock node once ZooKeeper is reachable again, if the session survived.
- No call waits unbounded: kazoo queues requests while it reconnects and waits for them without a
  deadline, so the recipe runs on a helper thread and every other call has a timeout.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.exceptions import LockTimeout as KazooLockTimeout
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState
from kazoo.recipe.lock import Lock as KazooLock

from lakecore.concurrency.locks import LockUnavailable, _GuardedLock, backoff_s
from lakecore.errors import InvalidTableConfig, LockTimeout

# How long past its timeout an acquire may take before it is declared stalled (ZooKeeper went away).
STALL_GRACE_S = 1.0
# Reconnection after ZooKeeper comes back should take about a second, not kazoo's default of up to an hour.
_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0}
_COMMAND_RETRY = {"max_tries": 3, "delay": 0.05, "backoff": 2, "max_delay": 1.0}
_MAX_NAME = 200


@dataclass(frozen=True)
class ZooKeeperLockConfig:
    """Where the lock lives and how long to wait; `key` is any string (see `znode_name`)."""

    connect: str                         # "host:port[,host:port...][/chroot]"
    key: str                             # table_lock_key(table URI), or e.g. "partition/fileId"
    base_path: str = "/weir/locks"
    session_timeout_s: float = 30.0      # a dead holder's lock is freed this long after it died
    connection_timeout_s: float = 15.0   # give up connecting (and any single request) after this
    acquire_timeout_s: float = 60.0      # acquire(timeout=None) waits this long
    acquire_retries: int = 3             # retries after ZooKeeper errors, within the acquire timeout
    retry_initial_s: float = 0.1
    retry_max_s: float = 2.0
    share_client: bool = True            # one kazoo client per connect string in this process

    def __post_init__(self) -> None:
        _check_connect(self.connect)
        if not self.key:
            raise InvalidTableConfig("a ZooKeeper lock key must not be empty")
        if not self.base_path.startswith("/") or self.base_path.endswith("/") or "//" in self.base_path:
            raise InvalidTableConfig(f"ZooKeeper lock base_path must look like '/weir/locks', got "
                                     f"{self.base_path!r}")
        for name in ("session_timeout_s", "connection_timeout_s", "retry_initial_s", "retry_max_s"):
            if not getattr(self, name) > 0:
                raise InvalidTableConfig(f"ZooKeeper lock {name} must be > 0, got {getattr(self, name)!r}")
        if not self.acquire_timeout_s >= 0 or self.acquire_retries < 0:
            raise InvalidTableConfig("ZooKeeper lock acquire_timeout_s and acquire_retries must be >= 0")

    @property
    def lock_path(self) -> str:
        return f"{self.base_path}/{znode_name(self.key)}"

    @classmethod
    def for_table(cls, connect: str, table_uri: str, **options: Any) -> ZooKeeperLockConfig:
        return cls(connect, table_lock_key(table_uri), **options)


def _check_connect(connect: str) -> None:
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

    def client(self, config: ZooKeeperLockConfig) -> Any:
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
    except Exception:  # already stopped, or its connection thread is gone: nothing left to free
        pass


def _session_of(client: Any) -> int | None:
    client_id = client.client_id
    return int(client_id[0]) if client_id else None


def _forget(client: Any, path: str) -> None:
    """Delete a lock node whenever the client can: kazoo queues the request while it reconnects."""
    try:
        client.delete_async(path)
    except Exception:  # the client is closed: its session, and so the node, is going away anyway
        pass


@dataclass(frozen=True)
class _Hold:
    client: Any = field(repr=False)
    path: str
    session: int


class _Stalled(Exception):
    """The recipe did not return within its timeout plus grace (ZooKeeper stopped answering)."""


class _Attempt:
    """One run of kazoo's blocking `Lock.acquire`, on a helper thread so the caller's deadline holds."""

    def __init__(self, recipe: Any, timeout: float) -> None:
        self._recipe = recipe
        self._timeout = timeout
        self._done = threading.Event()
        self._guard = threading.Lock()
        self._abandoned = False
        self._got = False
        self._error: BaseException | None = None

    def run(self) -> bool:
        threading.Thread(target=self._work, name="weir-zookeeper-lock", daemon=True).start()
        if not self._done.wait(self._timeout + STALL_GRACE_S):
            with self._guard:
                if not self._done.is_set():
                    self._abandoned = True
                    self._recipe.cancel()
                    raise _Stalled()
        if self._error is not None:
            raise self._error
        return self._got

    def _work(self) -> None:
        got, error = False, None
        try:
            got = bool(self._recipe.acquire(timeout=self._timeout))
        except BaseException as exc:  # handed to the caller's thread
            error = exc
        with self._guard:
            self._got, self._error = got, error
            self._done.set()
            abandoned = self._abandoned
        if abandoned and got:  # nobody is waiting for this lock any more
            _forget(self._recipe.client, f"{self._recipe.path}/{self._recipe.node}")


class ZooKeeperLock(_GuardedLock):
    """A table (or keyed) lock held as an ephemeral sequential znode through kazoo's Lock recipe."""

    def __init__(self, config: ZooKeeperLockConfig) -> None:
        super().__init__(config.acquire_timeout_s)
        self.config = config
        self.path = config.lock_path
        self._clients = shared_clients if config.share_client else ZooKeeperClients()
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._hold: _Hold | None = None
        self._lost = False
        self._listening: Any = None
        self._path_ready = False

    def describe(self) -> str:
        return f"ZooKeeper lock {self.path} on {self.config.connect}"

    def close(self) -> None:
        """Release, and stop this lock's own client (a shared client stays for other locks)."""
        self.release()
        if self._clients is not shared_clients:
            self._clients.close()

    # -- the table lock ---------------------------------------------------------------------

    def _take(self, deadline: float, timeout: float) -> None:
        client = self._clients.client(self.config)
        self._listen(client)
        try:
            self._hold = self._contend(client, deadline, timeout)
        except BaseException:
            self._unlisten()
            raise

    def _contend(self, client: Any, deadline: float, timeout: float) -> _Hold:
        cfg = self.config
        attempt = 0
        while True:
            recipe = KazooLock(client, self.path, identifier=self._owner)
            recipe.assured_path = self._path_ready  # the recipe creates the path when this is False
            failure: BaseException | None = None
            try:
                got = _Attempt(recipe, max(0.0, deadline - time.monotonic())).run()
            except (KazooLockTimeout, _Stalled):
                got = False
            except (KazooException, KazooTimeoutError) as exc:
                self._path_ready = False  # e.g. someone removed the lock path: create it again
                got, failure = False, exc
            if got:
                self._lost = False  # from here on, any connection trouble means the lock is lost
                node = f"{self.path}/{recipe.node}"
                session = _session_of(client)
                if session is not None and self._owns(client, node, session):
                    self._path_ready = True
                    return _Hold(client, node, session)
                _forget(client, node)
                failure = LockUnavailable("the ZooKeeper session dropped as the lock was acquired")
            elif failure is None:
                if client.connected:
                    raise LockTimeout(f"{self.describe()} held by {self._holder_of(client)} for more than "
                                      f"{timeout:.1f}s; retry later (ZooKeeper frees the lock of a holder "
                                      "that died after its session timeout)")
                failure = LockUnavailable("lost the connection to ZooKeeper while waiting for the lock")
            left = deadline - time.monotonic()
            if attempt >= cfg.acquire_retries or left <= 0:
                raise LockUnavailable(
                    f"{self.describe()} not acquired after {attempt + 1} attempt(s), last failure "
                    f"{type(failure).__name__}: {failure}; check that ZooKeeper is running and reachable, "
                    "then retry") from failure
            time.sleep(min(backoff_s(attempt, initial_s=cfg.retry_initial_s, cap_s=cfg.retry_max_s), left))
            attempt += 1
            wait_connected(client, max(0.0, deadline - time.monotonic()))

    def _give(self) -> None:
        hold, self._hold = self._hold, None
        self._unlisten()
        if hold is None:
            return
        if not self._lost and hold.client.connected:
            try:
                hold.client.delete_async(hold.path).get(timeout=self.config.connection_timeout_s)
                return
            except NoNodeError:
                return
            except Exception:  # connection trouble: fall back to deleting once reconnected
                pass
        _forget(hold.client, hold.path)

    def _still_held(self) -> bool:
        hold = self._hold
        if hold is None or self._lost or _session_of(hold.client) != hold.session:
            return False
        return self._owns(hold.client, hold.path, hold.session)

    # -- helpers ------------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        # Called on kazoo's connection thread: must not block.
        if state != KazooState.CONNECTED:
            self._lost = True

    def _listen(self, client: Any) -> None:
        self._lost = False
        client.add_listener(self._on_state)
        self._listening = client

    def _unlisten(self) -> None:
        client, self._listening = self._listening, None
        if client is not None:
            client.remove_listener(self._on_state)

    def _owns(self, client: Any, node: str, session: int) -> bool:
        """Whether `node` exists as an ephemeral node of `session` (the truth of holding the lock)."""
        try:
            stat = client.exists_async(node).get(timeout=self.config.connection_timeout_s)
        except Exception:
            return False
        return stat is not None and int(stat.ephemeralOwner) == session

    def _holder_of(self, client: Any) -> str:
        """The identifier (host:pid:id) of the current holder, for messages; 'unknown' if unsure."""
        try:
            wait = self.config.connection_timeout_s
            children = client.get_children_async(self.path).get(timeout=wait)
            contenders = sorted((c for c in children if "__lock__" in c), key=lambda c: c[-10:])
            if not contenders:
                return "nobody (it was just released)"
            data, _ = client.get_async(f"{self.path}/{contenders[0]}").get(timeout=wait)
            return bytes(data).decode("utf-8", "replace") or "unknown"
        except Exception:
            return "unknown"


def zookeeper_lock(connect_string: str, key: str, **options: Any) -> ZooKeeperLock:
    """`ZooKeeperLock(ZooKeeperLockConfig(connect_string, key, **options))`."""
    return ZooKeeperLock(ZooKeeperLockConfig(connect_string, key, **options))


# -- ephemeral nodes and child watches: the writer registry (lakecore.concurrency.writers) ---------
# Each call answers within `timeout` or raises LockUnavailable (this module's "ZooKeeper did not
# answer"); the registry translates that into its own error.

from collections.abc import Callable  # noqa: E402 - this section was appended to the lock module

from kazoo.exceptions import NodeExistsError  # noqa: E402


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
        _forget(client, path)  # the create is still queued; the delete is queued after it
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
        _forget(client, path)


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
