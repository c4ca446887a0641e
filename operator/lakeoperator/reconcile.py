"""The reconcile core: one resource's body in, its new status out, the plan carried out on a launcher.

    parse (specs) -> observe (the table on storage, the driver pod on the launcher) -> plan (plan/,
    pure) -> status (status.py, written by the caller BEFORE the action it describes is repeated) ->
    act (build/ + the launcher)

Shared by the kopf handlers and the local runner (`weir run`): neither the Kubernetes API nor kopf is
imported here, and the launcher (launch/) is passed in, so the core never knows where pods run. The
caller persists `Outcome.status` and `Outcome.applied` (the spec a writer's current submission runs,
for classify_change) and calls again after `Outcome.requeue_after`. Tables are read and created
through lakecore (the operator's read-side access; writes of data are the jobs').

Ordering that makes a crash or an operator restart harmless: a submission id is written to status by
the caller after the first reconcile returns it with the pod not yet created; the pod is created on
the next pass, under a name derived from that id, so it is created at most once (a launcher's create
is idempotent by name).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from lakeoperator.build.driver_pod import PodSettings, build_service_pod, build_writer_pod, child_name
from lakeoperator.launch import Launcher
from lakeoperator.plan.service import ServiceAction, plan_service
from lakeoperator.plan.table import TableAction, TablePlan, columns_to_add, plan_table
from lakeoperator.plan.writer import Action, WriterPhase, classify_change, observe_pod, plan_writer
from lakeoperator.specs import (
    LakeTableSpec,
    ObjectRef,
    SpecError,
    parse_lake_table,
    parse_lake_writer,
    parse_table_service,
)
from lakeoperator.status import (
    TableInfo,
    invalid_spec_status,
    location_changed_status,
    paused_status,
    read_service_status,
    read_writer_status,
    service_status,
    table_status,
    writer_status,
)

S = TypeVar("S")


@dataclass(frozen=True)
class Outcome:
    status: dict[str, Any]
    requeue_after: float | None = None
    events: tuple[tuple[str, str, str], ...] = ()     # (type Normal|Warning, reason, message)
    applied: Mapping[str, Any] | None = None          # writers: the spec body the submission runs
    done: bool = False                                # nothing more will happen without a change
    submitted: bool = False                           # a driver pod was created in this pass (metrics)


def _admit(body: Mapping[str, Any], now: datetime, parse: Callable[[Mapping[str, Any]], S],
           table_body: Mapping[str, Any] | None = None, *, table_ref: Callable[[S], str] | None = None,
           applied: Mapping[str, Any] | None = None) -> Outcome | tuple[ObjectRef, S, LakeTableSpec | None]:
    """The steps every kind shares before planning: a paused or unmanaged resource is left alone
    (ReconciliationPaused), an invalid spec — or a missing LakeTable it refers to — is reported
    (Ready=False, InvalidSpec, an Event), never retried until it changes. Else (ref, spec, table)."""
    ref = ObjectRef.from_body(body)
    old = body.get("status")
    if ref.paused or not ref.managed:
        return Outcome(paused_status(ref, old, now), done=True, applied=applied)
    try:
        spec = parse(body)
        table = None
        if table_ref is not None:
            if table_body is None:
                raise SpecError("tableRef.name", f"no LakeTable {table_ref(spec)!r} in namespace "
                                f"{ref.namespace}; create it, or fix the reference")
            try:
                table = parse_lake_table(table_body)
            except SpecError as exc:   # the table's mistake, reported as such: fixing the table fixes this
                raise SpecError("tableRef.name", f"LakeTable {table_ref(spec)!r} has an invalid spec "
                                f"({exc}); fix the LakeTable") from None
    except SpecError as exc:
        return _invalid(ref, exc, old, now, applied)
    return ref, spec, table


def _invalid(ref: ObjectRef, exc: SpecError, old: Mapping[str, Any] | None, now: datetime,
             applied: Mapping[str, Any] | None = None) -> Outcome:
    return Outcome(invalid_spec_status(ref, exc, old, now), done=True, applied=applied,
                   events=(("Warning", "InvalidSpec", str(exc)),))


# -- LakeTable ---------------------------------------------------------------------------------


def reconcile_table(body: Mapping[str, Any], now: datetime, *,
                    storage_options: Mapping[str, Any] | None = None) -> Outcome:
    """Create the table at spec.location, or adopt the one there after checking its config.
    `storage_options`: the options spec.storage refers to, resolved by the caller (a Secret's JSON)."""
    admitted = _admit(body, now, parse_lake_table)
    if isinstance(admitted, Outcome):
        return admitted
    ref, spec, _ = admitted
    old = body.get("status")
    if (old or {}).get("location") not in (None, spec.location):  # where no API server rule refused it
        status = location_changed_status(ref, old or {}, spec.location, now)
        return Outcome(status, done=True, events=(("Warning", "LocationChanged", status["lastError"]),))
    options = _options(spec, storage_options)
    error = observed = None
    try:
        observed = _table_config(spec, options)
    except Exception as exc:  # storage unreachable, no credentials, permission denied: reported, retried
        error = _storage_error(spec, exc)
    plan = plan_table(spec, observed)
    if plan.action == TableAction.REFUSE and error is None:
        status = table_status(ref, plan, old, now)
        return Outcome(status, done=True, events=(("Warning", "ConfigMismatch", status["lastError"] or ""),))
    info = None
    added: list[str] = []
    if error is None:
        try:
            if plan.action == TableAction.CREATE:
                _create_table(ref, spec, options)
            elif plan.action == TableAction.EVOLVE:
                added = _add_columns(spec, plan, options)
            info = _table_info(spec, options)
        except Exception as exc:
            error = _storage_error(spec, exc)
    status = table_status(ref, plan, old, now, info=info, error=error, location=spec.location)
    events = (("Warning", "StorageError", error),) if error else \
        (("Normal", "Created", f"created table at {spec.location}"),) if plan.action == TableAction.CREATE \
        else (("Normal", "Evolved", f"added column(s) {', '.join(added)} to the table"),) if added else ()
    return Outcome(status, requeue_after=30.0 if error else 60.0, events=events)


def _options(spec: LakeTableSpec, resolved: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The storage options to open the table with: the spec's public ones plus the resolved Secret's."""
    merged = {**spec.storage.options, **(resolved or {})}
    return merged or None


def _storage_error(spec: LakeTableSpec, exc: Exception) -> str:
    return (f"cannot reach the table at {spec.location}: {type(exc).__name__}: {exc}; check the location, "
            "spec.storage and the operator's access to it (it is retried)")


def _table_config(spec: LakeTableSpec, options: dict[str, Any] | None = None) -> dict[str, Any] | None:
    from lakecore.storage import open_storage
    from lakecore.table.table import CONFIG_PATH

    storage = open_storage(spec.location, options)
    try:
        config: dict[str, Any] = json.loads(storage.read(CONFIG_PATH))
    except (FileNotFoundError, NotADirectoryError):
        return None
    return config


def _create_table(ref: ObjectRef, spec: LakeTableSpec, options: dict[str, Any] | None = None) -> None:
    import pyarrow as pa

    from lakecore import Table
    from lakecore.config import ColumnGroup, LockSpec, schema_from_json
    from lakeoperator.plan.table import desired_config

    desired = desired_config(spec)
    schema: pa.Schema = schema_from_json(desired["schema"])
    lock = LockSpec.from_json(desired["lock"])
    Table.create(spec.location, schema=schema, record_key=spec.record_key,
                 partition_fields=spec.partition_fields, table_type=spec.table_type,
                 ordering_field=spec.ordering_field,
                 column_groups=[ColumnGroup(g.name, tuple(g.columns), g.ordering_field)
                                for g in spec.column_groups],
                 buckets=spec.buckets, concurrency_mode=spec.concurrency.mode,
                 tombstone_retention_hours=spec.tombstone_retention_hours, name=ref.name, lock=lock,
                 storage_options=options)


def _add_columns(spec: LakeTableSpec, plan: TablePlan, options: dict[str, Any] | None = None) -> list[str]:
    """Add the spec's new columns to the table (each into its column group); their names."""
    from lakecore import Table
    from lakecore.config import schema_from_json

    columns, groups = columns_to_add(plan)
    if columns:
        table = Table.open(spec.location, storage_options=options)
        table.add_columns(schema_from_json(columns), groups=groups)
    return [c["name"] for c in columns]


def _table_info(spec: LakeTableSpec, options: dict[str, Any] | None = None) -> TableInfo:
    from lakecore import Table
    from lakecore.timeline import to_epoch_ms

    timeline = Table.open(spec.location, storage_options=options).timeline()
    last = timeline.last_completed()
    at = datetime.fromtimestamp(to_epoch_ms(last.completion_time) / 1000, UTC) \
        if last is not None and last.completion_time else None
    return TableInfo(latest_instant=last.requested_time if last else None, latest_instant_time=at,
                     pending_compactions=sum(1 for i in timeline.pending if i.action == "compaction"),
                     active_writers=sum(1 for i in timeline.pending if i.action in ("commit", "deltacommit")))


def delta_commits_since(location: str, since: datetime | None,
                        storage_options: dict[str, Any] | None = None) -> int:
    """Writes completed on the table since `since` (for TableService triggers)."""
    from lakecore import Table
    from lakecore.timeline import to_epoch_ms

    cutoff = since.timestamp() * 1000 if since else 0
    timeline = Table.open(location, storage_options=storage_options).timeline()
    return sum(1 for i in timeline.completed if i.action in ("commit", "deltacommit")
               and i.completion_time and to_epoch_ms(i.completion_time) > cutoff)


# -- LakeWriter --------------------------------------------------------------------------------


def reconcile_writer(body: Mapping[str, Any], table_body: Mapping[str, Any] | None, launcher: Launcher,
                     now: datetime, settings: PodSettings, *, applied: Mapping[str, Any] | None = None,
                     source_location: str | None = None, winner_running: bool = False) -> Outcome:
    """Plan the writer and carry out the plan on `launcher`. `applied`: the spec body the current
    submission runs (None: none yet); `table_body`: its LakeTable (None: not found); `winner_running`:
    the write this writer's current submission lost a conflict to is still running
    (`conflict_winner_running`)."""
    admitted = _admit(body, now, parse_lake_writer, table_body, table_ref=lambda s: s.table_ref.name,
                      applied=applied)
    if isinstance(admitted, Outcome):
        return admitted
    ref, spec, table = admitted
    assert table is not None
    old = body.get("status")
    try:   # a spec the builder refuses (a managed spark.conf key) is invalid before anything is stopped
        build_writer_pod(ref, spec, table, "validate", settings, source_location=source_location)
    except SpecError as exc:
        return _invalid(ref, exc, old, now, applied)
    observed = replace(read_writer_status(old), winner_running=winner_running)
    if applied is not None:
        before = parse_lake_writer({**body, "spec": applied})
        observed = replace(observed, change=classify_change(before, spec))
    sid = observed.submission_id
    pod = launcher.get_pod(ref.namespace, child_name(sid)) if sid else None
    if pod is not None:
        observed = replace(observed, driver=observe_pod(pod))
    plan = plan_writer(ref, spec, observed, now)
    waiting = _table_not_ready(table_body)
    if plan.action == Action.SUBMIT and plan.submission_id != observed.submission_id and waiting:
        # a new submission waits for its table: against a missing or refused table the job could only
        # fail and spend the writer's budgets (a submission already recorded goes on: it was decided)
        plan = replace(plan, action=Action.WAIT, phase=observed.phase, attempts=observed.attempts,
                       submission_id=observed.submission_id, submitted_at=observed.submitted_at,
                       next_retry_at=observed.next_retry_at, reason="TableNotReady", message=waiting,
                       requeue_after=10.0, adopt_spec=False)
    running = plan.submission_id and plan.action in (Action.SUBMIT, Action.WAIT)
    driver = child_name(plan.submission_id) if running and plan.submission_id else None
    status = writer_status(ref, plan, old, now, driver_pod=driver)
    events: list[tuple[str, str, str]] = []
    submitted = False
    new_applied = dict(body["spec"]) if plan.adopt_spec or plan.action == Action.SUBMIT or applied is None \
        else applied
    if plan.action == Action.SUBMIT and plan.submission_id:
        if (old or {}).get("submissionId") != plan.submission_id:
            # the id goes to status first; the pod follows on the next pass (see the module docstring)
            return Outcome(status, requeue_after=0.0, applied=new_applied,
                           events=(("Normal", plan.reason, plan.message),))
        launcher.create_pod(build_writer_pod(ref, spec, table, plan.submission_id, settings,
                                             source_location=source_location))
        events.append(("Normal", "Submitted", f"driver pod {plan.submission_id}"))
        submitted = True
    elif plan.action == Action.DELETE_DRIVER and observed.driver is not None and observed.submission_id:
        launcher.delete_pod(ref.namespace, child_name(observed.submission_id))
        events.append(("Normal", plan.reason, plan.message))
    if plan.finished is not None:
        kind = "Normal" if plan.finished.cause.value == "success" else "Warning"
        events.append((kind, plan.reason, plan.message))
    done = plan.phase in (WriterPhase.SUCCEEDED, WriterPhase.FAILED, WriterPhase.ABORTED,
                          WriterPhase.SUSPENDED) and plan.action == Action.NONE
    requeue = plan.requeue_after if plan.requeue_after is not None else (None if done else 1.0)
    return Outcome(status, requeue_after=requeue, events=tuple(events), applied=new_applied, done=done,
                   submitted=submitted)


def _table_not_ready(table_body: Mapping[str, Any] | None) -> str | None:
    """Why a writer's LakeTable cannot take a new submission yet (None: it can). A table the operator
    does not manage (`weir.dev/managed: "false"`) is taken as it is."""
    if table_body is None:
        return None
    table = ObjectRef.from_body(table_body)
    status = table_body.get("status") or {}
    phase = status.get("phase")
    if not table.managed:
        return None
    location, recorded = (table_body.get("spec") or {}).get("location"), status.get("location")
    if recorded not in (None, location):  # also before the table's own pass refuses the change
        return (f"waiting for LakeTable {table.name}: its spec.location changed from {recorded} to "
                f"{location}, which is refused (`kubectl describe lt` says why)")
    if phase == "Ready":
        return None
    conditions = status.get("conditions") or ()
    ready: Mapping[str, Any] = next((c for c in conditions if c.get("type") == "Ready"), {})
    state = phase or ready.get("reason") or "not reconciled yet"
    return f"waiting for LakeTable {table.name} to be Ready (it is {state}; `kubectl describe lt` says why)"


# -- TableService ------------------------------------------------------------------------------


def reconcile_service(body: Mapping[str, Any], table_body: Mapping[str, Any] | None, launcher: Launcher,
                      now: datetime, settings: PodSettings, *,
                      storage_options: Mapping[str, Any] | None = None) -> Outcome:
    """Start the service's run when due (never two at once), record how runs ended."""
    from lakeoperator.status import parse_timestamp

    admitted = _admit(body, now, parse_table_service, table_body, table_ref=lambda s: s.table_ref.name)
    if isinstance(admitted, Outcome):
        return admitted
    ref, spec, table = admitted
    assert table is not None
    old = body.get("status")
    try:
        build_service_pod(ref, spec, table, "validate", settings)
    except SpecError as exc:
        return _invalid(ref, exc, old, now)
    created = parse_timestamp((body.get("metadata") or {}).get("creationTimestamp")) or now
    observed = read_service_status(old, created)
    if observed.active_run is not None:
        pod = launcher.get_pod(ref.namespace, child_name(observed.active_run.id))
        observed = replace(observed, run_pod=observe_pod(pod) if pod is not None else None)
    if spec.trigger is not None:
        last = observed.last_run.started_at if observed.last_run else None
        try:
            commits = delta_commits_since(table.location, last, _options(table, storage_options))
            observed = replace(observed, delta_commits_since_last_run=commits)
        except Exception:  # the table is not there yet: nothing to trigger on
            observed = replace(observed, delta_commits_since_last_run=0)
    plan = plan_service(ref, spec, observed, now)
    driver = child_name(plan.active_run.id) if plan.active_run else None
    status = service_status(ref, plan, old, now, driver_pod=driver)
    events: list[tuple[str, str, str]] = []
    submitted = False
    if plan.action == ServiceAction.START and plan.active_run is not None:
        recorded = ((old or {}).get("activeRun") or {}).get("id")
        if recorded != plan.active_run.id:
            return Outcome(status, requeue_after=0.0, events=(("Normal", plan.reason, plan.message),))
        launcher.create_pod(build_service_pod(ref, spec, table, plan.active_run.id, settings))
        events.append(("Normal", "RunStarted", f"run {plan.active_run.id}"))
        submitted = True
    for run_id in plan.delete_runs:
        launcher.delete_pod(ref.namespace, child_name(run_id))
    if plan.finished is not None:
        kind = "Warning" if plan.finished.outcome.value not in ("success", "busy") else "Normal"
        events.append((kind, "RunFinished", f"run {plan.finished.id}: {plan.finished.outcome.value}"))
    return Outcome(status, requeue_after=plan.requeue_after if plan.requeue_after is not None else 1.0,
                   events=tuple(events), done=plan.action.value == "none",
                   submitted=submitted)


__all__ = ["Outcome", "delta_commits_since", "reconcile_service", "reconcile_table", "reconcile_writer"]


def conflict_winner_running(status: Mapping[str, Any] | None, location: str,
                            storage_options: Mapping[str, Any] | None, heartbeat: Any) -> bool:
    """Whether a backing-off writer that lost a conflict must still wait: the winning instant is pending
    and its writer alive. Reads the table only in that case."""
    from lakecore.concurrency.liveness.heartbeat import is_alive
    from lakecore.storage import open_storage
    from lakecore.timeline import TimelineStore, now_ms
    from lakeoperator.status import lost_conflict

    conflict = lost_conflict(status)
    backing_off = (status or {}).get("phase") == WriterPhase.BACKING_OFF
    if conflict is None or not backing_off or not conflict.get("other"):
        return False
    storage = open_storage(location, dict(storage_options or {}) or None)
    winner = str(conflict["other"])
    pending = {i.requested_time for i in TimelineStore(storage).load().pending}
    return winner in pending and is_alive(storage, winner, now_ms(), heartbeat)
