"""Access to Weir's nodes on ZooKeeper: shared bases, and a tenant's own table nodes.

With credentials every node a client creates carries the digest ACL of those credentials — except the
shared bases (/weir, /weir/locks, /weir/writers, /weir/aborts), which every tenant must be able to
create its table's node under: they get `SHARED_ACL` (anyone may read them and create children;
nobody may delete or change them). ZooKeeper checks a delete against the parent's ACL, so a table's
nodes can only be created or deleted by its tenant. A refusal is `ZooKeeperAccessDenied`, never
retried. Without credentials everything is created open, as before. `ensure_table_paths` is what the
operator calls when a LakeTable on ZooKeeper becomes Ready.
"""

from __future__ import annotations

import logging
from typing import Any

from kazoo.exceptions import (
    AuthFailedError,
    KazooException,
    NoAuthError,
    NodeExistsError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.security import ACL, Id, Permissions

from lakecore.concurrency.zookeeper.clients import (
    Auth,
    Endpoint,
    access_denied,
    acl_for,
    check_connect,
    resolve_credentials,
    shared_clients,
    table_lock_key,
    unreachable,
    user_of,
    znode_name,
)
from lakecore.errors import InvalidTableConfig

log = logging.getLogger(__name__)

# The shared bases: every tenant creates its table's node under them; nobody deletes or changes them.
SHARED_ACL = [ACL(Permissions.READ | Permissions.CREATE, Id("world", "anyone"))]
_USE = Permissions.READ | Permissions.WRITE | Permissions.CREATE | Permissions.DELETE


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
        raise unreachable(f"creating {base_path}", exc) from exc


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
        raise unreachable(f"creating {path}", exc) from exc
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
        raise unreachable(f"reading the ACL of {path}", exc) from exc
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
        raise unreachable(f"sharing {base}", exc) from exc
