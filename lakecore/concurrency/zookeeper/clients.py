"""The kazoo client plumbing: with `locks/zookeeper.py`, the only module that imports kazoo.

Owns a cache of started kazoo clients per (connect string, session timeout, credentials), the mapping
of keys (table URIs, `partition/fileId` pairs) to znode names, the bounded calls the writer registry
makes (ephemeral nodes, child watches), and who may touch Weir's nodes. Knows nothing of locks beyond
raising `LockUnavailable` when ZooKeeper does not answer; the lock itself is `locks/zookeeper.py`.

Access: a process takes its ZooKeeper credentials from WEIR_ZOOKEEPER_USERNAME/PASSWORD (the operator
fills them from the LakeTable's `lock.zookeeper.credentialsSecret`; they are never written to table.json
or job args). With credentials, a client authenticates with the digest scheme and every node it creates
carries the digest ACL of those credentials (all rights for that user, none for anyone else: kazoo's
`default_acl`, which its Lock recipe and `makepath` parents use too) — except the shared bases
(/weir, /weir/locks, /weir/writers, /weir/aborts), which every tenant must be able to create its
table's node under: they get `SHARED_ACL` (anyone may read them and create children; nobody may delete
or change them). ZooKeeper checks a delete against the parent's ACL, so a table's nodes can only be
created or deleted by its tenant. A refusal is `ZooKeeperAccessDenied`, never retried. Without
credentials everything is created open, as before.

No call waits unbounded: kazoo queues requests while it reconnects and waits for them without a
deadline, so every call here has a timeout.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import quote

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KeeperState
from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id, Permissions, make_digest_acl

from lakecore.errors import InvalidTableConfig, LockUnavailable, ZooKeeperAccessDenied

log = logging.getLogger(__name__)

# Reconnection after ZooKeeper comes back should take about a second, not kazoo's default of up to an hour.
_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 1.0}
_COMMAND_RETRY = {"max_tries": 3, "delay": 0.05, "backoff": 2, "max_delay": 1.0}
_MAX_NAME = 200

USERNAME_ENV = "WEIR_ZOOKEEPER_USERNAME"
PASSWORD_ENV = "WEIR_ZOOKEEPER_PASSWORD"
# The shared bases: every tenant creates its table's node under them; nobody deletes or changes them.
SHARED_ACL = [ACL(Permissions.READ | Permissions.CREATE, Id("world", "anyone"))]
_USE = Permissions.READ | Permissions.WRITE | Permissions.CREATE | Permissions.DELETE


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
    connection_timeout_s: float = 15.0
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


# -- access: ACLs and refusals ---------------------------------------------------------------------


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


def ensure_shared_base(client: Any, base_path: str, timeout: float) -> None:
    """Create `base_path` (e.g. /weir/locks) and its missing ancestors as shared nodes (`SHARED_ACL`
    with credentials, open without), so that the table nodes made under it carry their tenant's ACL
    while any tenant can still add its own."""
    acl = SHARED_ACL if client.default_acl else None
    try:
        client.ensure_path_async(base_path, acl=acl).get(timeout=timeout)
    except (NoAuthError, AuthFailedError) as exc:
        raise access_denied(client, base_path, "creating", exc) from exc
    except (KazooException, KazooTimeoutError) as exc:
        raise _unreachable(f"creating {base_path}", exc) from exc


def ensure_owned_node(client: Any, path: str, timeout: float) -> bool:
    """Create `path` (its parent must exist) with the client's ACL, or check that an existing one lets the
    client use it; an open node found by a client with credentials gets the client's ACL (a table moving
    to credentials). True when the node was created or its ACL changed."""
    try:
        client.create_async(path, b"").get(timeout=timeout)
        return True
    except NodeExistsError:
        pass
    except (NoAuthError, AuthFailedError) as exc:
        raise access_denied(client, path, "creating", exc) from exc
    except (KazooException, KazooTimeoutError) as exc:
        raise _unreachable(f"creating {path}", exc) from exc
    try:
        acls, stat = client.get_acls_async(path).get(timeout=timeout)
        if not _may_use(client, acls):
            raise access_denied(client, path, "using")
        mine = acl_for(client)
        if mine is not None and list(acls) != mine and _is_open(acls):
            client.set_acls_async(path, mine, version=stat.aversion).get(timeout=timeout)
            log.warning("ZooKeeper node %s was open; it now carries the ACL of user %r", path,
                        user_of(client))
            return True
    except (NoAuthError, AuthFailedError) as exc:
        raise access_denied(client, path, "using", exc) from exc
    except (KazooException, KazooTimeoutError) as exc:
        raise _unreachable(f"reading the ACL of {path}", exc) from exc
    return False


def _is_open(acls: list[ACL]) -> bool:
    return any(a.id.scheme == "world" and a.id.id == "anyone" and a.perms & _USE == _USE for a in acls)


def _may_use(client: Any, acls: list[ACL]) -> bool:
    if _is_open(acls):
        return True
    mine = acl_for(client)
    ids = {(a.id.scheme, a.id.id) for a in mine} if mine else set()
    return any((a.id.scheme, a.id.id) in ids and a.perms & _USE == _USE for a in acls)


def table_node_paths(table_uri: str, *, lock_path: str | None = None, locks_base: str = "/weir/locks",
                     writers_base: str = "/weir/writers", aborts_base: str = "/weir/aborts") -> list[str]:
    """A table's ZooKeeper nodes: its lock's parent, its writer registry, its abort flags."""
    name = znode_name(table_lock_key(table_uri))
    return [lock_path or f"{locks_base}/{name}", f"{writers_base}/{name}", f"{aborts_base}/{name}"]


def ensure_table_paths(connect: str, table_uri: str, *, credentials: Auth = "environment",
                       lock_path: str | None = None, locks_base: str = "/weir/locks",
                       writers_base: str = "/weir/writers", aborts_base: str = "/weir/aborts",
                       session_timeout_s: float = 30.0, connection_timeout_s: float = 15.0) -> list[str]:
    """Create the table's lock parent, writers path and aborts path (`table_node_paths`) with the ACL of
    `credentials` (default: this process's), their bases as shared nodes; idempotent. Returns the paths.
    With credentials, a base found open (made by a client without credentials) becomes shared, so
    nobody can delete a tenant's idle node and re-create it as theirs. ZooKeeperAccessDenied when a
    path exists but these credentials may not use it; LockUnavailable when ZooKeeper does not answer
    within `connection_timeout_s`. The operator calls it when a LakeTable on ZooKeeper becomes Ready."""
    check_connect(connect)
    endpoint = Endpoint(connect.strip(), session_timeout_s, connection_timeout_s,
                        resolve_credentials(credentials))
    client = shared_clients.client(endpoint)
    paths = table_node_paths(table_uri, lock_path=lock_path, locks_base=locks_base,
                             writers_base=writers_base, aborts_base=aborts_base)
    bases = [locks_base, writers_base, aborts_base]
    for path in paths:
        if any(base == path or base.startswith(path + "/") for base in bases):
            raise InvalidTableConfig(f"the table's ZooKeeper node {path} is (or is above) one of the shared "
                                     f"bases {', '.join(bases)}; give the lock its own path, like "
                                     f"{locks_base}/<table>")
    for base in dict.fromkeys(path.rsplit("/", 1)[0] or "/" for path in paths):  # bases before any node
        ensure_shared_base(client, base, connection_timeout_s)
        if endpoint.credentials is not None and base != "/":
            _share_open_base(client, base, connection_timeout_s)
    for path in paths:
        ensure_owned_node(client, path, connection_timeout_s)
    return paths


def _share_open_base(client: Any, base: str, timeout: float) -> None:
    try:
        acls, stat = client.get_acls_async(base).get(timeout=timeout)
        if _is_open(acls) and any(a.perms & Permissions.ADMIN for a in acls):
            client.set_acls_async(base, SHARED_ACL, version=stat.aversion).get(timeout=timeout)
            log.warning("ZooKeeper node %s was open; it is now shared (anyone may read it and create "
                        "children; nobody may delete or change it)", base)
    except (NoAuthError, AuthFailedError) as exc:
        raise access_denied(client, base, "sharing", exc) from exc
    except (KazooException, KazooTimeoutError) as exc:
        raise _unreachable(f"sharing {base}", exc) from exc


# -- ephemeral nodes and child watches: the writer registry (lakecore.concurrency.liveness.writers) --
# Each call answers within `timeout` or raises LockUnavailable (this module's "ZooKeeper did not
# answer"); the registry translates that into its own error.


def _unreachable(doing: str, exc: BaseException) -> LockUnavailable:
    return LockUnavailable(f"ZooKeeper did not answer while {doing} ({type(exc).__name__}: {exc}); check "
                           "that ZooKeeper is running and reachable, then retry")


def create_ephemeral(client: Any, path: str, data: bytes, timeout: float, *, shared_base: str = "") -> bool:
    """Create `path` holding `data` as an ephemeral node of the client's session (missing parents are
    created as persistent nodes, with the client's ACL below `shared_base`, which is made shared);
    False when the node exists already."""
    if shared_base:
        ensure_shared_base(client, shared_base, timeout)
    try:
        client.create_async(path, data, ephemeral=True, makepath=True).get(timeout=timeout)
    except NodeExistsError:
        return False
    except (NoAuthError, AuthFailedError) as exc:
        raise access_denied(client, path.rsplit("/", 1)[0], f"creating {path} under", exc) from exc
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
    except (NoAuthError, AuthFailedError) as exc:
        raise access_denied(client, path, "listing", exc) from exc
    except (KazooException, KazooTimeoutError) as exc:
        raise _unreachable(f"listing {path}", exc) from exc
    pending = [(name, client.get_async(f"{path}/{name}")) for name in names]
    found: dict[str, bytes] = {}
    for name, result in pending:
        try:
            data, _ = result.get(timeout=max(0.0, deadline - time.monotonic()))
        except NoNodeError:
            continue
        except (NoAuthError, AuthFailedError) as exc:
            raise access_denied(client, f"{path}/{name}", "reading", exc) from exc
        except (KazooException, KazooTimeoutError) as exc:
            raise _unreachable(f"reading {path}/{name}", exc) from exc
        found[name] = bytes(data or b"")
    return found


def watch_children(client: Any, path: str, callback: Callable[[list[str]], bool], timeout: float, *,
                   shared_base: str = "") -> None:
    """Call `callback(children)` now and after every change of `path`'s children (kazoo's ChildrenWatch,
    which re-lists after a reconnect or a new session), until it returns False. `path` is created
    (persistent, with the client's ACL below `shared_base`, which is made shared) when missing. Later
    calls run on kazoo's event thread: the callback must not block."""
    if shared_base:
        ensure_shared_base(client, shared_base, timeout)
    try:
        client.ensure_path_async(path).get(timeout=timeout)
    except (NoAuthError, AuthFailedError) as exc:
        raise access_denied(client, path, "creating", exc) from exc
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
    if failed and isinstance(failed[0], (NoAuthError, AuthFailedError)):
        raise access_denied(client, path, "watching", failed[0]) from failed[0]
    if failed:
        raise _unreachable(f"watching {path}", failed[0]) from failed[0]
    if not first.is_set():  # kazoo stops a watch silently when the node vanished before listing it
        raise _unreachable(f"watching {path}", NoNodeError(f"{path} was deleted meanwhile"))


# -- persistent flags and data watches: abort flags (lakecore.concurrency.liveness.aborts) ----------


def create_persistent(client: Any, path: str, data: bytes, timeout: float) -> bool:
    """Create `path` holding `data` as a persistent node (missing parents too); False when it exists
    already. LockUnavailable when ZooKeeper does not answer within `timeout` (the create may still
    land later: creating again is how to find out)."""
    try:
        client.create_async(path, data, makepath=True).get(timeout=timeout)
    except NodeExistsError:
        return False
    except (NoAuthError, AuthFailedError) as exc:
        raise access_denied(client, path, "creating", exc) from exc
    except (KazooException, KazooTimeoutError) as exc:
        raise _unreachable(f"creating {path}", exc) from exc
    return True


def child_names(client: Any, path: str, timeout: float) -> list[str]:
    """The children of `path`; [] when it does not exist."""
    try:
        return list(client.get_children_async(path).get(timeout=timeout))
    except NoNodeError:
        return []
    except (NoAuthError, AuthFailedError) as exc:
        raise access_denied(client, path, "listing", exc) from exc
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
