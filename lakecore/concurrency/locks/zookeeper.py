"""The ZooKeeper table lock: kazoo's lock recipe, under `<base_path>/<znode name of the key>`.

Owns the lock's config and the lock; the kazoo clients it runs on (one per connect string, shared
with the writer registry) are `concurrency/zookeeper`'s. Must not decide what the lock protects
(concurrency/transaction.py) nor retry whole commits.

Failure behaviour, which is the point of this module:
- ZooKeeper unreachable: `LockUnavailable` within `connection_timeout_s`, naming the connect string.
- ZooKeeper refuses our credentials on the lock path (another tenant's table, or none given):
  `ZooKeeperAccessDenied` at once, never retried.
- Session SUSPENDED or LOST while held: `is_held()` is False from that moment on (a state listener
  flips it; the lock does not come back even if the session does), and `release()` does not raise;
  it deletes the lock node once ZooKeeper is reachable again, if the session survived.
- `is_held()` (asked right before a commit point) answers without a round trip within a short lease
  after ZooKeeper last proved the node ours, and asks ZooKeeper (`exists` on the node) after that.
  Why the lease is sound: ZooKeeper expires a session only after a whole session timeout without
  hearing from the client, and the client hears of a broken connection after two thirds of it (the
  listener above). So while the session is unchanged, the listener silent and less than LEASE_S (far
  below any session timeout a server negotiates) has passed since a request that proved the node
  ours was sent, the node exists. The clock counts time the process was stopped or the machine slept
  (CLOCK_BOOTTIME), the pauses that could otherwise outlive a session unseen. Only someone deleting
  the lock node by hand goes unseen for up to LEASE_S: never delete a live holder's lock node.
  Acquiring needs no extra round trip either: we created our node and saw it first in this very
  session, continuously connected (the listener counts every other state).
- No call waits unbounded: every request has the caller's deadline (plus STALL_GRACE_S when
  ZooKeeper stops answering).

The recipe: an ephemeral sequential node `<uuid>__lock__<sequence>` under the lock path; the
contender with the lowest sequence holds the lock, every other one watches the contender just below
it. These are kazoo's node names and its rule, so this lock and kazoo's `Lock` (older Weir versions)
exclude each other. It runs in the caller's thread and sends the create and the children listing
together: an uncontended acquire is one round trip, and a hand-over one watch event and one listing.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import AuthFailedError, ConnectionLoss, KazooException, NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from lakecore.concurrency.locks.protocol import GuardedLock, backoff_s
from lakecore.concurrency.zookeeper import (
    Credentials,
    ZooKeeperClients,
    access_denied,
    check_connect,
    ensure_shared_base,
    forget,
    process_connection_timeout,
    process_credentials,
    session_of,
    shared_clients,
    table_lock_key,
    wait_connected,
    znode_name,
)
from lakecore.config import LockSpec
from lakecore.errors import InvalidTableConfig, LockTimeout, LockUnavailable

log = logging.getLogger(__name__)

# How long past its timeout an acquire may take before it is declared stalled (ZooKeeper went away).
STALL_GRACE_S = 1.0
# How long after ZooKeeper proved the lock node ours `is_held()` answers without asking again (see
# above; capped at a tenth of the session timeout asked for).
LEASE_S = 1.0
_BOOTTIME = getattr(time, "CLOCK_BOOTTIME", None)


def _now() -> float:
    """Seconds on a clock that keeps counting while the process is stopped or the machine sleeps."""
    return time.clock_gettime(_BOOTTIME) if _BOOTTIME is not None else time.monotonic()


@dataclass(frozen=True)
class ZooKeeperLockConfig:
    """Where the lock lives and how long to wait; `key` is any string (see `znode_name`)."""

    connect: str                         # "host:port[,host:port...][/chroot]"
    key: str                             # table_lock_key(table URI), or e.g. "partition/fileId"
    base_path: str = "/weir/locks"
    session_timeout_s: float = 30.0      # a dead holder's lock is freed this long after it died
    # give up connecting (and any single request) after this: WEIR_ZOOKEEPER_CONNECTION_TIMEOUT_S, else 15 s
    connection_timeout_s: float = field(default_factory=process_connection_timeout)
    acquire_timeout_s: float = 60.0      # acquire(timeout=None) waits this long
    acquire_retries: int = 3             # retries after ZooKeeper errors, within the acquire timeout
    retry_initial_s: float = 0.1
    retry_max_s: float = 2.0
    share_client: bool = True            # one kazoo client per connect string in this process
    path: str = ""                       # the lock's znode; default <base_path>/<znode_name(key)>
    # who we are to ZooKeeper: by default this process's WEIR_ZOOKEEPER_USERNAME/PASSWORD (None: open ACL)
    credentials: Credentials | None = field(default_factory=process_credentials)

    def __post_init__(self) -> None:
        check_connect(self.connect)
        if self.path and (not self.path.startswith("/") or self.path.endswith("/") or "//" in self.path):
            raise InvalidTableConfig(f"ZooKeeper lock path must look like '/weir/locks/<table>', got "
                                     f"{self.path!r}")
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
        return self.path or f"{self.base_path}/{znode_name(self.key)}"

    @classmethod
    def for_table(cls, connect: str, table_uri: str, **options: Any) -> ZooKeeperLockConfig:
        return cls(connect, table_lock_key(table_uri), **options)


@dataclass
class _Hold:
    client: Any = field(repr=False)
    path: str
    session: int
    proven_at: float  # _now() when a request that proved the node ours (in this session) was sent


# kazoo's Lock recipe names its nodes `<uuid hex>__lock__<10-digit sequence>` and waits behind the
# contender with the next lower sequence; this lock takes the same nodes the same way, so processes
# on kazoo's recipe (older Weir versions) and on this one exclude each other on one lock path.
NODE_MARK = "__lock__"
_CONTENDER = re.compile(r"__lock__(-?\d{10})$")


class _NodeVanished(KazooException):
    """Our contender node is not among the lock's children (its session went): contend afresh."""


def predecessor(children: list[str], name: str) -> str | None:
    """The contender `name` waits behind (kazoo's rule: the highest sequence below ours), None when it
    holds the lock; _NodeVanished when `name` is not among `children`."""
    mine = name.split(NODE_MARK, 1)[1]  # what follows the mark, as kazoo takes it (even a negative one)
    best: tuple[str, str] | None = None
    found = False
    for child in children:
        found = found or child == name
        match = _CONTENDER.search(child)
        if match is not None and match.group(1) < mine and (best is None or match.group(1) > best[0]):
            best = (match.group(1), child)
    if not found:
        raise _NodeVanished(f"lock node {name} vanished while contending")
    return best[1] if best is not None else None


def _wait(result: Any, deadline: float) -> Any:
    """A kazoo async result by `deadline` (KazooTimeoutError after it: ZooKeeper stopped answering)."""
    return result.get(timeout=max(0.0, deadline - time.monotonic()) + STALL_GRACE_S)


class ZooKeeperLock(GuardedLock):
    """A table (or keyed) lock held as an ephemeral sequential znode through kazoo's Lock recipe."""

    def __init__(self, config: ZooKeeperLockConfig) -> None:
        super().__init__(config.acquire_timeout_s)
        self.config = config
        self.path = config.lock_path
        self._clients = shared_clients if config.share_client else ZooKeeperClients()
        self._owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._hold: _Hold | None = None
        self._lost = False
        self._troubles = 0  # connection states other than CONNECTED heard while listening
        self._listening: Any = None
        self._path_ready = False
        self._waking: threading.Event | None = None  # set while waiting behind another contender
        self._lease_s = min(LEASE_S, config.session_timeout_s / 10)

    @property
    def spec(self) -> LockSpec:
        """The table lock this is, as a table records it in table.json."""
        return LockSpec("zookeeper", connect=self.config.connect, path=self.path)

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
            failure: BaseException | None = None
            started, troubles, session_before = _now(), self._troubles, session_of(client)
            try:
                if not self._path_ready:  # the lock path, with our ACL, under a shared base
                    ensure_shared_base(client, self.path.rsplit("/", 1)[0] or "/", cfg.connection_timeout_s)
                    _wait(client.ensure_path_async(self.path), deadline)
                    self._path_ready = True
                node = self._race(client, deadline)
            except (NoAuthError, AuthFailedError) as exc:
                raise access_denied(client, self.path, "taking the lock", exc) from exc
            except KazooTimeoutError:  # ZooKeeper stopped answering within the deadline
                node = None
            except KazooException as exc:
                self._path_ready = False  # e.g. someone removed the lock path: create it again
                node, failure = None, exc
            if node is not None:
                self._lost = False  # from here on, any connection trouble means the lock is lost
                session = session_of(client)
                # created and seen first in one session, connected all along: ours as of `started`
                quiet = self._troubles == troubles and session is not None and session == session_before
                proven: float | None = started if quiet and _now() - started < self._lease_s else None
                if proven is None and session is not None:  # ask ZooKeeper
                    asked = _now()
                    proven = asked if self._owns(client, node, session) else None
                if proven is not None and session is not None:
                    return _Hold(client, node, session, proven)
                forget(client, node)
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

    def _race(self, client: Any, deadline: float) -> str | None:
        """One contention, in the caller's thread: create our sequential node and list the contenders
        in one round trip (ZooKeeper answers a session's requests in order, so the listing holds our
        node), then wait behind our predecessor until we are first. Returns our node's path, or None
        at the deadline. Leaves no node behind when it does not return one: a node whose creation
        outcome is unknown (the connection broke, or the deadline passed, with the create on the
        wire) is deleted as soon as its name is known."""
        created = client.create_async(f"{self.path}/{uuid.uuid4().hex}{NODE_MARK}", self._owner.encode(),
                                      ephemeral=True, sequence=True)
        listed = client.get_children_async(self.path)
        node: str | None = None
        try:
            node = str(_wait(created, deadline))
            name = node.rsplit("/", 1)[1]
            children = _wait(listed, deadline)
            while True:
                ahead = predecessor(children, name)
                if ahead is None:
                    return node
                woken = threading.Event()
                self._waking = woken  # connection trouble wakes us too (_on_state): look again
                if _wait(client.exists_async(f"{self.path}/{ahead}", watch=lambda _, w=woken: w.set()),
                         deadline) is not None and not woken.wait(max(0.0, deadline - time.monotonic())):
                    self._give_up(client, created, node)
                    return None
                children = _wait(client.get_children_async(self.path), deadline)
        except BaseException:
            self._give_up(client, created, node)
            raise
        finally:
            self._waking = None

    @staticmethod
    def _give_up(client: Any, created: Any, node: str | None) -> None:
        """Delete our contender node, now or once its creation is answered."""
        if node is not None:
            forget(client, node)
            return

        def answered(outcome: Any) -> None:  # on kazoo's callback thread: must not block
            if outcome.exception is None:
                forget(client, outcome.value)
            elif isinstance(outcome.exception, ConnectionLoss):
                log.warning("a lock node's creation was cut off by a connection loss; if it was created it "
                            "is deleted with this process's ZooKeeper session")

        created.rawlink(answered)

    def _give(self) -> None:
        hold, self._hold = self._hold, None
        self._unlisten()
        if hold is None:
            return
        # Waited for: once release() returns the lock is free, even if this process ends abruptly
        # right after (not waiting left the node to its session timeout when one did: os._exit)
        if not self._lost and hold.client.connected:
            try:
                hold.client.delete_async(hold.path).get(timeout=self.config.connection_timeout_s)
                return
            except NoNodeError:
                return
            except Exception as exc:  # connection trouble: fall back to deleting once reconnected
                log.debug("releasing %s: %s; deleting it once reconnected", self.describe(), exc)
        forget(hold.client, hold.path)

    def _still_held(self) -> bool:
        hold = self._hold
        if hold is None or self._lost or session_of(hold.client) != hold.session:
            return False
        asked = _now()
        if asked - hold.proven_at < self._lease_s:
            return True
        if not self._owns(hold.client, hold.path, hold.session):
            return False
        hold.proven_at = asked
        return True

    # -- helpers ------------------------------------------------------------------------------

    def _on_state(self, state: str) -> None:
        # Called on kazoo's connection thread: must not block.
        if state != KazooState.CONNECTED:
            self._lost = True
            self._troubles += 1
            waking = self._waking
            if waking is not None:
                waking.set()

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


def zookeeper_spec(connect_string: str, table_uri: str, *, base_path: str = "/weir/locks") -> LockSpec:
    """What a table records to take the ZooKeeper lock `zookeeper_lock(connect, table_lock_key(uri))`."""
    config = ZooKeeperLockConfig(connect_string.strip(), table_lock_key(table_uri), base_path=base_path)
    return LockSpec("zookeeper", connect=config.connect, path=config.lock_path)


