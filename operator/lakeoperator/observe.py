"""The observe step: everything one reconcile pass reads besides the resource itself, gathered once and
typed, through the `Store` protocol (store.py: the Kubernetes API on a cluster, the state directory under
`weir run`), as CloudNativePG fills its managed resources once per pass:

    LakeTable     the storage options its spec.storage.secretRef names (or why they cannot be read) and the
                  tenant's ZooKeeper credentials (lock.zookeeper.credentialsSecret; under `weir run`, this
                  process's own)
    LakeWriter    its LakeTable, the location of its source table, the spec its current submission runs,
                  and whether the winner of the conflict it lost still runs (read from the table's storage)
    TableService  its LakeTable, and the storage options to count that table's commits with

The reconcile core (reconcile.py) takes these values; the controller and the local runner only call
`observe` and the core. Must not decide (the core and the planners do) nor write anything. An input that
is missing or unreadable is a value (None, an error) for the core to report; only the store's own errors
(the API unreachable) fail the pass.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from lakecore.errors import InvalidTableConfig, LakecoreError
from lakeoperator.plan.writer import WriterPhase
from lakeoperator.specs import (
    LakeTableSpec,
    SecretKeyRef,
    SpecError,
    parse_lake_table,
    parse_lake_writer,
    parse_table_service,
)
from lakeoperator.status import lost_conflict
from lakeoperator.store import Store
from lakeoperator.supervision import watched_table

log = logging.getLogger(__name__)
LOCK_PROBE_S = 5.0   # how long a pass waits for the ZooKeeper of a table's lock to answer
PROBE_MEMORY_S = 10.0   # an ensemble that did not answer is not asked again for this long
_probes: dict[tuple[str, Any], tuple[float, str]] = {}   # (connect, credentials) -> (when, why not)
_probing: dict[tuple[str, Any], threading.Lock] = {}
_probing_guard = threading.Lock()
S = TypeVar("S")


@dataclass(frozen=True)
class TableInputs:
    body: Mapping[str, Any]
    storage_options: dict[str, Any] | None = None   # the options the spec's storage Secret holds
    secret_error: SpecError | None = None           # that Secret is missing or malformed, or spec.location
                                                    # cannot be used here (relative, on a cluster)
    zookeeper_credentials: Any = None               # lakecore.concurrency.zookeeper.Credentials, or None
    zookeeper_error: str | None = None              # why they could not be read (the table is not supervised)
    catalog_properties: dict[str, str] | None = None   # spec.publish.catalog's Secret (None: none; weir run)
    catalog_error: str | None = None                # that Secret is missing or malformed (nothing registers)
    rival: str | None = None                        # another LakeTable that manages spec.location's table
    lock_error: str | None = None                   # the ZooKeeper of spec.lock cannot be reached from here


@dataclass(frozen=True)
class WriterInputs:
    body: Mapping[str, Any]
    table: Mapping[str, Any] | None = None          # the LakeTable of spec.tableRef (None: there is none)
    applied: Mapping[str, Any] | None = None        # the spec body the current submission runs
    source_location: str | None = None              # spec.source.table's location (None: none, or unknown)
    winner_running: bool = False                    # the write it lost a conflict to is pending and alive
    table_name: str | None = None                   # spec.tableRef.name (None: the spec does not parse)
    other_tables: tuple[str, ...] = ()              # when there is no such table: the namespace's tables


@dataclass(frozen=True)
class ServiceInputs:
    body: Mapping[str, Any]
    table: Mapping[str, Any] | None = None
    storage_options: dict[str, Any] | None = None   # to open the table with (its storage Secret's options)
    table_name: str | None = None
    other_tables: tuple[str, ...] = ()


Inputs = TableInputs | WriterInputs | ServiceInputs


def observe(store: Store, kind: str, body: Mapping[str, Any]) -> Inputs:
    """The inputs of one pass over `body`, a resource of `kind` read from `store`."""
    if kind == "LakeTable":
        return observe_table(store, body)
    if kind == "LakeWriter":
        return observe_writer(store, body)
    return observe_service(store, body)


def same_location(a: object, b: object) -> bool:
    return isinstance(a, str) and isinstance(b, str) and a.rstrip("/") == b.rstrip("/")


def rival_table(store: Store, body: Mapping[str, Any], location: str) -> str | None:
    """Another LakeTable of the namespace, not being deleted, that manages the table at `location` (its
    status records it) or, when none does yet, was made before this one (creation time, then name). None
    once this one manages it: the namespace is listed only until then."""
    if same_location((body.get("status") or {}).get("location"), location):
        return None
    meta = body.get("metadata") or {}
    mine = (str(meta.get("creationTimestamp") or ""), str(meta.get("name")))
    for other in store.bodies("LakeTable", _namespace(body)):   # one listing
        meta = other.get("metadata") or {}
        name = str(meta.get("name"))
        if name == mine[1] or meta.get("deletionTimestamp") or \
                not same_location((other.get("spec") or {}).get("location"), location):
            continue
        theirs = (str(meta.get("creationTimestamp") or ""), name)
        if same_location((other.get("status") or {}).get("location"), location) or theirs < mine:
            return name
    return None


def observe_table(store: Store, body: Mapping[str, Any]) -> TableInputs:
    namespace = _namespace(body)
    spec = _parsed(parse_lake_table, body)
    if spec is None:
        return TableInputs(body)
    if not store.inherits_environment and "://" not in spec.location and not spec.location.startswith("/"):
        # relative to what? The operator's working directory is not a driver pod's
        return TableInputs(body, secret_error=SpecError(
            "spec.location", f"{spec.location!r} is a relative path, which only `weir run` resolves (against "
            "the directory it runs in); on a cluster name the table by a URI (s3://bucket/path, ...) or an "
            "absolute path every driver pod mounts"))
    rival = rival_table(store, body, spec.location)
    if rival is not None:
        return TableInputs(body, rival=rival)
    try:
        options = storage_options(store, namespace, spec)
    except SpecError as exc:
        return TableInputs(body, secret_error=exc)
    catalog: dict[str, Any] = {}
    try:
        catalog["catalog_properties"] = catalog_properties(store, namespace, spec)
    except SpecError as exc:
        catalog["catalog_error"] = str(exc)
    try:
        credentials = zookeeper_credentials(store, namespace, spec)
    except (SpecError, InvalidTableConfig) as exc:
        return TableInputs(body, options, zookeeper_error=str(exc), **catalog)
    return TableInputs(body, options, zookeeper_credentials=credentials,
                       lock_error=lock_error(spec, credentials), **catalog)


def lock_error(spec: LakeTableSpec, credentials: Any) -> str | None:
    """Why the ZooKeeper ensemble of the table's lock cannot be reached (or refuses the credentials) from
    here; None when it can, or the table takes another lock. A connected client is kept and reused, so
    this costs nothing while ZooKeeper is up. While it is down, one pass waits up to LOCK_PROBE_S for it
    and the answer stands for PROBE_MEMORY_S: the other tables on that ensemble (the passes running at
    the same time wait for that one answer) are not each held LOCK_PROBE_S."""
    lock = spec.lock
    if lock.provider != "zookeeper" or not lock.connect:
        return None
    from lakecore.concurrency.zookeeper import Endpoint, shared_clients

    key = (lock.connect, credentials)
    with _probing_guard:
        probing = _probing.setdefault(key, threading.Lock())
    with probing:   # one probe of an ensemble at a time
        said = _probes.get(key)
        if said is not None and time.monotonic() - said[0] < PROBE_MEMORY_S:
            return said[1]
        try:
            shared_clients.client(Endpoint(lock.connect, connection_timeout_s=LOCK_PROBE_S,
                                           credentials=credentials))
        except LakecoreError as exc:
            _probes[key] = (time.monotonic(), str(exc))
            return str(exc)
        _probes.pop(key, None)
    return None


def observe_writer(store: Store, body: Mapping[str, Any]) -> WriterInputs:
    namespace = _namespace(body)
    applied = store.applied_spec(body)
    spec = _parsed(parse_lake_writer, body)
    if spec is None:
        return WriterInputs(body, applied=applied)
    table = store.get("LakeTable", namespace, spec.table_ref.name)
    source_location = None
    if spec.source.table is not None:
        source = store.get("LakeTable", namespace, spec.source.table.name)
        # its location only: the source table's spec is its own resource's to report
        location = ((source or {}).get("spec") or {}).get("location")
        source_location = str(location) if location else None
    return WriterInputs(body, table, applied, source_location, _winner_running(store, namespace, body, table),
                        spec.table_ref.name, _others(store, namespace, table))


def observe_service(store: Store, body: Mapping[str, Any]) -> ServiceInputs:
    namespace = _namespace(body)
    spec = _parsed(parse_table_service, body)
    if spec is None:
        return ServiceInputs(body)
    table = store.get("LakeTable", namespace, spec.table_ref.name)
    options = None
    if table is not None:
        try:
            options = storage_options(store, namespace, parse_lake_table(table))
        except SpecError:
            options = None   # the LakeTable reports it; the trigger just sees no table
    return ServiceInputs(body, table, options, spec.table_ref.name, _others(store, namespace, table))


def _others(store: Store, namespace: str, table: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The namespace's LakeTables, listed only when the one referred to is not there."""
    return () if table is not None else tuple(store.names("LakeTable", namespace))


# -- the Secrets a LakeTable names -----------------------------------------------------------------


def storage_options(store: Store, namespace: str, table: LakeTableSpec) -> dict[str, Any] | None:
    """The options in the Secret a LakeTable's spec.storage.secretRef names (the operator opens the table
    itself to create, adopt, report, trigger services and delete); None without a secretRef, or where the
    store holds no Secrets. SpecError when the Secret is missing or not a JSON object."""
    ref = table.storage.secret_ref
    if ref is None or not store.holds_secrets:
        return None
    return _json_secret(store, namespace, ref, "storage.secretRef", "storage options")


def catalog_properties(store: Store, namespace: str, table: LakeTableSpec) -> dict[str, str] | None:
    """The pyiceberg catalog properties in the Secret spec.publish.catalog.secretRef names (the operator
    registers the published Iceberg table with them); None without a catalog, or where the store holds
    no Secrets (`weir run`: pyiceberg's own configuration). SpecError when the Secret is missing or not
    a JSON object."""
    catalog = table.publish.catalog if table.publish else None
    if catalog is None or not store.holds_secrets:
        return None
    values = _json_secret(store, namespace, catalog.secret_ref, "publish.catalog.secretRef",
                          "pyiceberg catalog properties")
    return {str(k): str(v) for k, v in values.items()}


def _json_secret(store: Store, namespace: str, ref: SecretKeyRef, field: str, what: str) -> dict[str, Any]:
    value = store.secret_value(namespace, ref.name, ref.key)
    if value is None:
        raise SpecError(field, f"no Secret {ref.name!r} with key {ref.key!r} in namespace {namespace}; "
                        f"create it (a JSON object of {what})")
    try:
        options = json.loads(value)
    except ValueError:
        options = None
    if not isinstance(options, dict):
        raise SpecError(field, f"Secret {ref.name!r} key {ref.key!r} is not a JSON object of {what}; fix it")
    return options


def zookeeper_credentials(store: Store, namespace: str, table: LakeTableSpec) -> Any:
    """The tenant's ZooKeeper credentials from the Secret lock.zookeeper.credentialsSecret names (None
    without one); where the store holds no Secrets or the table names none and the drivers share this
    process's environment (`weir run`), this process's own (WEIR_ZOOKEEPER_USERNAME/PASSWORD).
    SpecError when the Secret or a key is missing."""
    from lakecore.concurrency.zookeeper import Credentials, process_credentials

    ref = table.lock_credentials
    if ref is None or not store.holds_secrets:
        return process_credentials() if store.inherits_environment else None
    values = [store.secret_value(namespace, ref.name, k) for k in (ref.username_key, ref.password_key)]
    if any(v is None for v in values):
        raise SpecError("lock.zookeeper.credentialsSecret", f"no Secret {ref.name!r} with keys "
                        f"{ref.username_key!r} and {ref.password_key!r} in namespace {namespace}; create it")
    return Credentials(str(values[0]), str(values[1]))


# -- a lost conflict's winner ----------------------------------------------------------------------


def _winner_running(store: Store, namespace: str, body: Mapping[str, Any],
                    table: Mapping[str, Any] | None) -> bool:
    status = body.get("status") or {}
    if table is None or status.get("phase") != WriterPhase.BACKING_OFF or lost_conflict(status) is None:
        return False
    try:
        watched = watched_table(namespace, table, storage_options(store, namespace, parse_lake_table(table)))
        return conflict_winner_running(status, watched.location, watched.storage_options, watched.heartbeat)
    except Exception as exc:  # cannot tell: restart as the backoff says (a loser may lose again)
        log.warning("could not check the winner of %s/%s's lost conflict: %s", namespace,
                    (body.get("metadata") or {}).get("name"), exc)
        return False


def conflict_winner_running(status: Mapping[str, Any] | None, location: str,
                            storage_options: Mapping[str, Any] | None, heartbeat: Any) -> bool:
    """Whether a backing-off writer that lost a conflict must still wait: the winning instant is pending
    and its writer alive. Reads the table only in that case."""
    from lakecore.concurrency.liveness.heartbeat import is_alive
    from lakecore.storage import open_storage
    from lakecore.timeline import TimelineStore, now_ms

    conflict = lost_conflict(status)
    backing_off = (status or {}).get("phase") == WriterPhase.BACKING_OFF
    if conflict is None or not backing_off or not conflict.get("other"):
        return False
    storage = open_storage(location, dict(storage_options or {}) or None)
    winner = str(conflict["other"])
    pending = {i.requested_time for i in TimelineStore(storage).load().pending}
    return winner in pending and is_alive(storage, winner, now_ms(), heartbeat)


def _parsed(parse: Callable[[Mapping[str, Any]], S], body: Mapping[str, Any]) -> S | None:
    """The resource's spec; None when it does not parse (the core reports that: nothing to observe)."""
    try:
        return parse(body)
    except SpecError:
        return None


def _namespace(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("namespace") or "default")


__all__ = ["Inputs", "ServiceInputs", "TableInputs", "WriterInputs", "catalog_properties",
           "conflict_winner_running", "observe",
           "observe_service", "observe_table", "observe_writer", "storage_options", "zookeeper_credentials"]
