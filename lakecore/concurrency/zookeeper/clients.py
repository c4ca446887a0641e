"""ZooKeeper clients: who a process is to ZooKeeper, and one started kazoo client per connection.

Owns a cache of started kazoo clients per (connect string, session timeout, credentials), this
process's credentials (WEIR_ZOOKEEPER_USERNAME/PASSWORD: the operator fills them from the LakeTable's
`lock.zookeeper.credentialsSecret`; they are never written to table.json or job args) and how long it
waits to connect unless told (WEIR_ZOOKEEPER_CONNECTION_TIMEOUT_S, default 15 s), the ACL a
client gives the nodes it creates (the digest ACL of its credentials: all rights for that user, none
for anyone else, kazoo's `default_acl`; open without credentials), the errors for a refusal
(`ZooKeeperAccessDenied`, never retried) and for no answer (`LockUnavailable`), and the mapping of keys
(table URIs, `partition/fileId` pairs) to znode names. Knows nothing of locks, registries or flags.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import math
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import quote

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import KeeperState
from kazoo.security import ACL, OPEN_ACL_UNSAFE, make_digest_acl

from lakecore.errors import InvalidTableConfig, LockUnavailable, ZooKeeperAccessDenied

log = logging.getLogger(__name__)

# Reconnection after ZooKeeper comes back should take about a second, not kazoo's default of up to an hour.
_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0}
_COMMAND_RETRY = {"max_tries": 3, "delay": 0.05, "backoff": 2, "max_delay": 1.0}
# How long one connection attempt waits for ZooKeeper's answer to its handshake (kazoo waits the whole
# session timeout, 30 s by default, longer than the connection timeout): a server that accepted the
# connection and never answered it (ZooKeeper 3.8 now and then, right as it starts; a half-open
# connection) costs this, then the next attempt runs. A live server answers in milliseconds.
HANDSHAKE_TIMEOUT_S = 5.0
_MAX_NAME = 200

USERNAME_ENV = "WEIR_ZOOKEEPER_USERNAME"
PASSWORD_ENV = "WEIR_ZOOKEEPER_PASSWORD"
CONNECTION_TIMEOUT_ENV = "WEIR_ZOOKEEPER_CONNECTION_TIMEOUT_S"
DEFAULT_CONNECTION_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class Credentials:
    """A ZooKeeper digest identity. The password shows in no repr, message or log."""

    username: str
    password: str = field(repr=False)

    def __post_init__(self) -> None:
        if not self.username or ":" in self.username or not self.password:
            raise InvalidTableConfig(f"ZooKeeper username {self.username!r} must be non-empty without ':' "
                                     "and the password non-empty; fix the keys of the ZooKeeper credentials "
                                     "Secret")


# Where a caller's credentials come from: given, none (open ACL), or this process's environment.
Auth = Credentials | None | Literal["environment"]


def process_credentials(environ: Mapping[str, str] | None = None) -> Credentials | None:
    """This process's ZooKeeper credentials from WEIR_ZOOKEEPER_USERNAME/PASSWORD; None when neither is
    set; InvalidTableConfig when only one is."""
    env = os.environ if environ is None else environ
    username, password = env.get(USERNAME_ENV, ""), env.get(PASSWORD_ENV, "")
    if not username and not password:
        return None
    if not username or not password:
        missing, present = (USERNAME_ENV, PASSWORD_ENV) if not username else (PASSWORD_ENV, USERNAME_ENV)
        raise InvalidTableConfig(f"{present} is set but {missing} is not; set both (from the Secret named "
                                 "in the LakeTable's lock.zookeeper.credentialsSecret) or neither")
    return Credentials(username, password)


def process_connection_timeout(environ: Mapping[str, str] | None = None) -> float:
    """How long this process waits for ZooKeeper to answer unless a caller says: the seconds in
    WEIR_ZOOKEEPER_CONNECTION_TIMEOUT_S, else 15; InvalidTableConfig unless a positive number."""
    env = os.environ if environ is None else environ
    text = env.get(CONNECTION_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_CONNECTION_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise InvalidTableConfig(f"{CONNECTION_TIMEOUT_ENV}={text!r} is not a number of seconds > 0; set it "
                                 "to e.g. 5, or unset it for the default of 15")
    return seconds


def resolve_credentials(auth: Auth) -> Credentials | None:
    return process_credentials() if auth == "environment" else auth


class Connection(Protocol):
    """Where a client connects, as whom, and how long it waits (a ZooKeeperLockConfig is one)."""

    @property
    def connect(self) -> str: ...
    @property
    def session_timeout_s(self) -> float: ...
    @property
    def connection_timeout_s(self) -> float: ...
    @property
    def credentials(self) -> Credentials | None: ...


@dataclass(frozen=True)
class Endpoint:
    """A Connection by itself (for callers without a lock config)."""

    connect: str
    session_timeout_s: float = 30.0
    connection_timeout_s: float = field(default_factory=process_connection_timeout)
    credentials: Credentials | None = None


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
    """Started kazoo clients, one per (connect string, session timeout, credentials); kazoo clients are
    thread-safe. A client with credentials authenticates with them and creates nodes with their ACL.

    `shared_clients` is the process-wide instance. A client that cannot (re)connect within the
    connection timeout is stopped and dropped rather than left retrying in the background; its
    sessions' locks were lost already (their holders saw SUSPENDED).
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._clients: dict[tuple[str, float, Credentials | None], Any] = {}
        self._pid = os.getpid()

    def client(self, config: Connection) -> Any:
        """A connected client for `config`; LockUnavailable within `config.connection_timeout_s`."""
        credentials = config.credentials
        key = (config.connect, config.session_timeout_s, credentials)
        with self._guard:
            if self._pid != os.getpid():  # forked: the parent's clients are not ours to use or stop
                self._clients, self._pid = {}, os.getpid()
            client = self._clients.get(key)
            if client is None:
                auth: dict[str, Any] = {}
                if credentials is not None:
                    auth = {"auth_data": [("digest", f"{credentials.username}:{credentials.password}")],
                            "default_acl": owner_acl(credentials)}
                try:
                    client = KazooClient(hosts=config.connect, timeout=config.session_timeout_s,
                                         connection_retry=dict(_CONNECTION_RETRY),
                                         command_retry=dict(_COMMAND_RETRY), **auth)
                except (ValueError, KazooException) as exc:
                    raise InvalidTableConfig(f"ZooKeeper connect string {config.connect!r} is invalid "
                                             f"({exc}); use 'host:2181[,host2:2181]'") from exc
                _bound_handshake(client)
                client.start_async()
                atexit.register(_stop_at_exit, client)  # runs before kazoo's own hook (atexit is LIFO)
                self._clients[key] = client
        if wait_connected(client, config.connection_timeout_s):
            return client
        with self._guard:
            dropped = not client.connected and self._clients.get(key) is client
            if dropped:
                del self._clients[key]
        if dropped:
            _stop(client)
        if client.client_state == KeeperState.AUTH_FAILED:
            raise access_denied(client, "/", f"connecting to ZooKeeper at {config.connect}:",
                                AuthFailedError())
        raise LockUnavailable(
            f"cannot reach ZooKeeper at {config.connect} within {config.connection_timeout_s:.1f}s: check "
            f"that ZooKeeper is running there and that the lock connect string {config.connect!r} names "
            "its host:port")

    def __contains__(self, connect: object) -> bool:
        """Whether a client for this connect string is cached (started, connected or reconnecting)."""
        with self._guard:
            return any(c == connect for c, _, _ in self._clients)

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


def _bound_handshake(client: Any) -> None:
    """Cap each connection attempt's handshake (its connect request and the authentication that
    follows: kazoo's `_invoke`, used for nothing else) at HANDSHAKE_TIMEOUT_S; kazoo's retry then makes
    the next attempt. kazoo 2.11 has no option for it (its issue #517)."""
    connection = client._connection
    invoke = connection._invoke

    def bounded(timeout: float, request: Any, xid: int | None = None) -> Any:
        return invoke(min(timeout, HANDSHAKE_TIMEOUT_S), request, xid)

    connection._invoke = bounded


def wait_connected(client: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not client.connected:
        left = deadline - time.monotonic()
        if left <= 0 or client.client_state == KeeperState.AUTH_FAILED:  # kazoo stops connecting then
            return False
        time.sleep(min(0.02, left))
    return True


def _stop_at_exit(client: Any, timeout_s: float = 5.0) -> None:
    """Stop a client when the process exits, within `timeout_s`. kazoo's own exit hook joins its
    worker threads, and a worker blocked in a watch's read while ZooKeeper is unreachable never
    returns: a writer would hang at exit instead of ending. Stopping the client first fails such
    reads; if even that does not finish in time, kazoo's hook is dropped and its threads (daemons)
    end with the process."""
    stopper = threading.Thread(target=_stop, args=(client,), name="weir-zookeeper-exit", daemon=True)
    stopper.start()
    stopper.join(timeout_s)
    if stopper.is_alive():
        atexit.unregister(client.handler.stop)


def _stop(client: Any) -> None:
    try:
        client.stop()
        client.close()
    except Exception as exc:  # already stopped, or its connection thread is gone: nothing left to free
        log.debug("stopping a kazoo client: %s", exc)


def session_of(client: Any) -> int | None:
    client_id = client.client_id
    return int(client_id[0]) if client_id else None


def forget(client: Any, path: str, *, tries: int = 5) -> None:
    """Delete a node whenever the client can, without waiting: kazoo queues the request while it
    reconnects, and a request that was on the wire when the connection broke (ConnectionLoss: it
    may or may not have run) is sent again, so that a session surviving the outage does not keep the
    node (a lock node would be held by nobody, for as long as this process lives)."""
    try:
        result = client.delete_async(path)
    except Exception as exc:  # the client is closed: its session, and so the node, is going away anyway
        log.debug("deleting %s later failed: %s", path, exc)
        return

    def done(outcome: Any) -> None:  # on kazoo's callback thread: must not block
        error = outcome.exception
        if error is None or isinstance(error, NoNodeError | SessionExpiredError | ConnectionClosedError):
            return  # deleted, or gone with its session
        if tries > 1 and isinstance(error, ConnectionLoss):
            forget(client, path, tries=tries - 1)
        else:
            log.warning("could not delete ZooKeeper node %s (%s: %s); it goes when this process's session "
                        "ends", path, type(error).__name__, error)

    result.rawlink(done)


# -- who may: ACLs and refusals -----------------------------------------------------------------


def owner_acl(credentials: Credentials | None) -> list[ACL]:
    """The ACL of nodes created with `credentials`: all rights for that user, none for anyone else;
    open without credentials."""
    if credentials is None:
        return list(OPEN_ACL_UNSAFE)
    return [make_digest_acl(credentials.username, credentials.password, all=True)]


def acl_for(client: Any) -> list[ACL] | None:
    """The ACL a client of `ZooKeeperClients` gives the nodes it creates (its kazoo `default_acl`, which
    `create`/`ensure_path` use when no acl is passed); None means open (no credentials). Nodes directly
    under a shared base need the base to exist first: `ensure_shared_base`."""
    return list(client.default_acl) if client.default_acl else None


def user_of(client: Any) -> str | None:
    """The digest user a client authenticates as; None without credentials."""
    for scheme, credential in client.auth_data:
        if scheme == "digest":
            return str(credential).split(":", 1)[0]
    return None


def access_denied(client: Any, path: str, doing: str,
                  exc: BaseException | None = None) -> ZooKeeperAccessDenied:
    """The error for ZooKeeper refusing `client` (NoAuthError / AuthFailedError) while `doing` on `path`."""
    user = user_of(client)
    who = f"user {user!r}" if user else f"a client without credentials ({USERNAME_ENV}/{PASSWORD_ENV} unset)"
    what = f" ({type(exc).__name__})" if exc is not None else ""
    return ZooKeeperAccessDenied(
        f"ZooKeeper refused {doing} {path} to {who}{what}: the credentials in {USERNAME_ENV}/{PASSWORD_ENV} "
        f"do not match the ACL of {path}; set the Secret named in the LakeTable's "
        "lock.zookeeper.credentialsSecret (the table's writers, services and operator must all use the "
        "tenant's credentials)", path=path, user=user)


def unreachable(doing: str, exc: BaseException) -> LockUnavailable:
    return LockUnavailable(f"ZooKeeper did not answer while {doing} ({type(exc).__name__}: {exc}); check "
                           "that ZooKeeper is running and reachable, then retry")
