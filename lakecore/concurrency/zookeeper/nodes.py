"""The bounded ZooKeeper calls of the writer registry (ephemeral nodes, child watches) and of the
abort flags (persistent nodes, data watches).

No call waits unbounded: kazoo queues requests while it reconnects and waits for them without a
deadline, so every call here has a timeout, and answers within it or raises LockUnavailable ("ZooKeeper
did not answer"), which the registry and the abort flags translate into their own errors.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import (
    AuthFailedError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError

from lakecore.concurrency.zookeeper.access import ensure_shared_base
from lakecore.concurrency.zookeeper.clients import access_denied, forget, unreachable

log = logging.getLogger(__name__)
# -- ephemeral nodes and child watches: the writer registry (lakecore.concurrency.liveness.writers) --


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
        raise unreachable(f"creating {path}", exc) from exc
    except KazooException as exc:
        raise unreachable(f"creating {path}", exc) from exc
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
        raise unreachable(f"listing {path}", exc) from exc
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
            raise unreachable(f"reading {path}/{name}", exc) from exc
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
        raise unreachable(f"creating {path}", exc) from exc
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
        raise unreachable(f"watching {path}", TimeoutError(f"no answer within {timeout:.1f}s"))
    if failed and isinstance(failed[0], (NoAuthError, AuthFailedError)):
        raise access_denied(client, path, "watching", failed[0]) from failed[0]
    if failed:
        raise unreachable(f"watching {path}", failed[0]) from failed[0]
    if not first.is_set():  # kazoo stops a watch silently when the node vanished before listing it
        raise unreachable(f"watching {path}", NoNodeError(f"{path} was deleted meanwhile"))


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
        raise unreachable(f"creating {path}", exc) from exc
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
        raise unreachable(f"listing {path}", exc) from exc


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
        raise unreachable(f"watching {path}", TimeoutError(f"no answer within {timeout:.1f}s"))
    if failed:
        raise unreachable(f"watching {path}", failed[0]) from failed[0]
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
