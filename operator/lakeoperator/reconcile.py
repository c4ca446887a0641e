"""The reconcile core: one resource's observed inputs in, its new status out, the plan carried out on a
launcher.

    observe (observe.py: what the store holds besides the resource) -> parse (specs) -> observe the
    table on storage and the driver pod on the launcher -> plan (plan/, pure) -> status (status.py,
    written by the caller BEFORE the action it describes is repeated) -> act (builders/ + the launcher)

`reconcile(inputs, ...)` dispatches over the three kinds. Shared by the Kubernetes controller and the
local runner (`weir run`): neither the Kubernetes API nor kopf is imported here, and the launcher
(launch/) is passed in, so the core never knows where pods run. The caller persists `Outcome.status`
and `Outcome.applied` (the spec a writer's current submission runs, for classify_change) and calls
again after `Outcome.requeue_after`. Tables are read and created through lakecore (the operator's
read-side access; writes of data are the jobs').

Ordering that makes a crash or an operator restart harmless: a submission id is written to status by
the caller after the first reconcile returns it with the pod not yet created; the pod is created on
the next pass, under a name derived from that id, so it is created at most once (a launcher's create
is idempotent by name).
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from lakecore.config import TableConfig
from lakecore.errors import InvalidTableConfig
from lakeoperator.builders.driver_pod import PodSettings, build_service_pod, build_writer_pod, child_name
from lakeoperator.launch import Launcher
from lakeoperator.observe import Inputs, TableInputs, WriterInputs
from lakeoperator.plan.publish import due_targets, published_fields
from lakeoperator.plan.service import ServiceAction, plan_service
from lakeoperator.plan.table import TableAction, TablePlan, columns_to_add, desired_config, plan_table
from lakeoperator.plan.writer import Action, WriterPhase, classify_change, observe_pod, plan_writer
from lakeoperator.publishing import publish_targets
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
    location_in_use_status,
    lost_writes_message,
    paused_status,
    read_service_status,
    read_writer_status,
    run_ended,
    service_status,
    table_status,
    timestamp,
    writer_status,
)

log = logging.getLogger(__name__)
S = TypeVar("S")
LOCK_SWITCH_TIMEOUT_S = 30.0   # waits out a commit holding the old lock; longer: retried at the next pass


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
           applied: Mapping[str, Any] | None = None, other_tables: Sequence[str] = ()
           ) -> Outcome | tuple[ObjectRef, S, LakeTableSpec | None]:
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
                named = table_ref(spec)
                # the named one among them: created since it was looked for (the next pass finds it)
                close = difflib.get_close_matches(named, [t for t in other_tables if t != named], n=1,
                                                  cutoff=0.6)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise SpecError("tableRef.name", f"no LakeTable {named!r} in namespace {ref.namespace}"
                                f"{hint}; create it, or fix the reference")
            try:
                table = parse_lake_table(table_body)
            except SpecError as exc:   # the table's mistake, reported as such: fixing the table fixes this
                raise SpecError("tableRef.name", f"LakeTable {table_ref(spec)!r} has an invalid spec "
                                f"({exc.field_path}: see the LakeTable's status); fix the LakeTable"
                                ) from None
    except SpecError as exc:
        return _invalid(ref, exc, old, now, applied)
    return ref, spec, table


def _column_group_problem(group: str | None, table: LakeTableSpec) -> str | None:
    """Why a writer's columnGroup does not fit its table (None: it does)."""
    if group is None:
        return None
    names = [g.name for g in table.column_groups]
    if not names:
        return f"{group!r}: the table has no column groups; remove columnGroup"
    if group in names:
        return None
    close = difflib.get_close_matches(group, names, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{group!r} is not one of the table's column groups ({', '.join(names)}){hint}; fix it"


def _invalid(ref: ObjectRef, exc: SpecError, old: Mapping[str, Any] | None, now: datetime,
             applied: Mapping[str, Any] | None = None) -> Outcome:
    return Outcome(invalid_spec_status(ref, exc, old, now), done=True, applied=applied,
                   events=(("Warning", "InvalidSpec", str(exc)),))


# -- LakeTable ---------------------------------------------------------------------------------


def reconcile(inputs: Inputs, launcher: Launcher, now: datetime, settings: PodSettings) -> Outcome:
    """One pass over the resource `inputs` were observed for (observe.py)."""
    if isinstance(inputs, TableInputs):
        return reconcile_table(inputs.body, now, storage_options=inputs.storage_options,
                               secret_error=inputs.secret_error, catalog_properties=inputs.catalog_properties,
                               catalog_error=inputs.catalog_error, rival=inputs.rival,
                               lock_error=inputs.lock_error)
    if isinstance(inputs, WriterInputs):
        return reconcile_writer(inputs.body, inputs.table, launcher, now, settings, applied=inputs.applied,
                                source_location=inputs.source_location, winner_running=inputs.winner_running,
                                other_tables=inputs.other_tables)
    return reconcile_service(inputs.body, inputs.table, launcher, now, settings,
                             storage_options=inputs.storage_options, other_tables=inputs.other_tables)


def reconcile_table(body: Mapping[str, Any], now: datetime, *,
                    storage_options: Mapping[str, Any] | None = None,
                    secret_error: SpecError | None = None,
                    catalog_properties: Mapping[str, str] | None = None,
                    catalog_error: str | None = None, rival: str | None = None,
                    lock_error: str | None = None) -> Outcome:
    """Create the table at spec.location, or adopt the one there after checking its config; then publish
    the spec.publish targets due. `storage_options`: the options spec.storage refers to, resolved by the
    caller (a Secret's JSON); `secret_error`: why they could not be (a missing Secret may be created
    later: looked at again, as Secrets are not watched); `catalog_properties`, `catalog_error`: the same
    for spec.publish.catalog's Secret. `rival`: another LakeTable that manages the table at spec.location
    (refused, looked at again: it may go). `lock_error`: why the ZooKeeper of spec.lock cannot be reached
    (the table is then not Ready, reason LockUnreachable, so writers wait rather than fail; looked at
    again every 30 s; nothing that needs the lock is done meanwhile)."""
    if secret_error is not None:
        ref = ObjectRef.from_body(body)
        return Outcome(invalid_spec_status(ref, secret_error, body.get("status"), now), requeue_after=10.0,
                       events=(("Warning", "InvalidSpec", str(secret_error)),))
    admitted = _admit(body, now, parse_lake_table)
    if isinstance(admitted, Outcome):
        return admitted
    ref, spec, _ = admitted
    old = body.get("status")
    if rival is not None:
        status = location_in_use_status(ref, old, spec.location, rival, now)
        return Outcome(status, requeue_after=30.0,
                       events=(("Warning", "LocationInUse", status["lastError"]),))
    if (old or {}).get("location") not in (None, spec.location):  # where no API server rule refused it
        status = location_changed_status(ref, old or {}, spec.location, now)
        return Outcome(status, done=True, events=(("Warning", "LocationChanged", status["lastError"]),))
    try:   # the spec in lakecore's form, once: compared with the table's, and created from
        desired = desired_config(spec, ref.name)
    except InvalidTableConfig as exc:   # a table lakecore would refuse to create
        return _invalid(ref, SpecError("spec", f"{exc}; fix the spec"), old, now)
    options = _options(spec, storage_options)
    error = observed = None
    try:
        observed = _table_config(spec, options)
    except Exception as exc:  # storage unreachable, no credentials, permission denied: reported, retried
        error = _storage_error(spec, exc)
    plan = plan_table(desired, observed, keep_codec=spec.compression is None)
    if plan.action == TableAction.REFUSE and error is None:
        status = table_status(ref, plan, old, now)
        return Outcome(status, done=True, events=(("Warning", "ConfigMismatch", status["lastError"] or ""),))
    info = switched = recoded = retention = None
    added: list[str] = []
    reason = None
    if error is None and lock_error is not None and plan.action != TableAction.CREATE:
        try:
            info = _table_info(spec, options)   # what it holds, for the status; nothing that locks
        except Exception as exc:
            error = _storage_error(spec, exc)
    elif error is None:
        try:
            if plan.action == TableAction.CREATE:
                _create_table(spec, desired, options)
            elif plan.action == TableAction.EVOLVE:
                switched = _switch_lock(spec, desired, options)
                added = _add_columns(spec, plan, options)
                recoded = _set_compression(spec, plan.desired or desired, options)
                retention = _set_tombstone_retention(spec, plan.desired or desired, options)
            info = _table_info(spec, options)
        except Exception as exc:
            error = _storage_error(spec, exc)
    if error is None and lock_error is not None:
        reason, error = "LockUnreachable", (
            f"the table's lock cannot be taken: {lock_error}. Writers and services wait until it can; reads "
            "are not affected (looked at again every 30 s)")
    status = table_status(ref, plan, old, now, info=info, error=error, location=spec.location,
                          error_reason=reason)
    events: tuple[tuple[str, str, str], ...] = (("Warning", reason or "StorageError", error),) if error else \
        (("Normal", "Created", f"created table at {spec.location}"),) if plan.action == TableAction.CREATE \
        else (("Normal", "Evolved", f"added column(s) {', '.join(added)} to the table"),) if added else ()
    if spec.publish is None:
        status.update(published=None, publishedInstant=None)
    elif info is not None and error is None:
        due = due_targets(spec.publish, old, info.latest_instant)
        if due:
            outcomes = publish_targets(spec, due, options, catalog_properties, catalog_error)
            status.update(published_fields(spec.publish, old, outcomes, timestamp(now)))
            events += tuple(("Warning", "PublishFailed", f"{o.format}: {o.error}")
                            for o in outcomes if o.error)
    lost = info.lost_writes if info is not None and info.lost_writes is not None else ()
    if lost and list(lost) != list((old or {}).get("lostWrites") or ()):   # said when it changes
        events += (("Warning", "CompletedFileLost", lost_writes_message(spec.location, lost) or ""),)
    if switched and not error:
        events += (("Normal", "LockSwitched", switched),)
    if recoded and not error:
        events += (("Normal", "CompressionChanged", recoded),)
    if retention and not error:
        events += (("Normal", "TombstoneRetentionChanged", retention),)
    return Outcome(status, requeue_after=30.0 if error else 60.0, events=events)


def _options(spec: LakeTableSpec, resolved: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The storage options to open the table with: the spec's public ones plus the resolved Secret's."""
    merged = {**spec.storage.options, **(resolved or {})}
    return merged or None


def _storage_error(spec: LakeTableSpec, exc: Exception) -> str:
    return (f"cannot reach the table at {spec.location}: {type(exc).__name__}: {exc}; check the location, "
            "spec.storage and the operator's access to it (it is retried)")


def _table_config(spec: LakeTableSpec, options: dict[str, Any] | None = None) -> TableConfig | None:
    """The config of the table at spec.location, as lakecore reads it (None: there is none)."""
    from lakecore.storage import open_storage
    from lakecore.table.table import CONFIG_PATH

    storage = open_storage(spec.location, options)
    try:
        data = storage.read(CONFIG_PATH)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return TableConfig.loads(data, table=spec.location)


def _create_table(spec: LakeTableSpec, desired: TableConfig, options: dict[str, Any] | None) -> None:
    from lakecore import Table

    Table.create_from_config(spec.location, desired, storage_options=options)


def _switch_lock(spec: LakeTableSpec, desired: TableConfig, options: dict[str, Any] | None) -> str | None:
    """Record the spec's lock in table.json when the table records another (lakecore holds both locks
    meanwhile, so no commit runs under either; writers that opened the table before stop at their next
    critical section and reopen it). What was done, for the Event; None when nothing was to do."""
    from lakecore import Table

    table = Table.open(spec.location, storage_options=options)
    before = table.config.lock
    if before.mismatch(desired.lock) is None:
        return None
    now = table.set_lock_provider(desired.lock, timeout=LOCK_SWITCH_TIMEOUT_S)
    return f"the table's lock is now {now.describe()} (was {before.describe()})"


def _set_compression(spec: LakeTableSpec, desired: TableConfig, options: dict[str, Any] | None) -> str | None:
    """Record the spec's codec in table.json when the table records another (lakecore's set_compression,
    under the table lock: writers may run). What was done, for the Event; None when nothing was to do."""
    from lakecore import Table

    table = Table.open(spec.location, storage_options=options)
    before = table.config.compression
    if before == desired.compression:
        return None
    table.set_compression(desired.compression, timeout=LOCK_SWITCH_TIMEOUT_S)
    return (f"files written from now on use {desired.compression} (was {before}); files written before "
            "keep theirs")


def _set_tombstone_retention(spec: LakeTableSpec, desired: TableConfig, options: dict[str, Any] | None
                             ) -> str | None:
    """Record the spec's tombstone retention in table.json when the table records another (under the
    table lock: writers may run). What was done, for the Event; None when nothing was to do."""
    from lakecore import Table

    table = Table.open(spec.location, storage_options=options)
    before, after = table.config.tombstone_retention_hours, desired.tombstone_retention_hours
    if before == after:
        return None
    table.set_tombstone_retention(after, timeout=LOCK_SWITCH_TIMEOUT_S)
    said = "kept for ever" if after is None else f"kept {after:g} hours"
    was = "for ever" if before is None else f"{before:g} hours"
    return f"tombstones are {said} in rewrites from now on (was {was})"


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
    from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
    from lakecore.concurrency.rollback import lost_completions
    from lakecore.timeline import now_ms, to_epoch_ms

    table = Table.open(spec.location, storage_options=options)
    timeline = table.timeline()
    last = timeline.last_completed()
    at = datetime.fromtimestamp(to_epoch_ms(last.completion_time) / 1000, UTC) \
        if last is not None and last.completion_time else None
    heartbeat = HeartbeatConfig(float(spec.heartbeat.interval_seconds), spec.heartbeat.tolerable_misses)
    try:   # a diagnosis: its failure (a listing that failed) must not hold the table's writers
        lost: tuple[str, ...] | None = lost_completions(table.storage, timeline, heartbeat, now_ms())
    except Exception as exc:
        log.warning("could not look for writes whose completed file was lost at %s: %s", spec.location, exc)
        lost = None
    return TableInfo(latest_instant=last.requested_time if last else None, latest_instant_time=at,
                     latest_action=last.action if last else None,
                     pending_compactions=sum(1 for i in timeline.pending if i.action == "compaction"),
                     active_writers=sum(1 for i in timeline.pending if i.action in ("commit", "deltacommit")),
                     lost_writes=lost)


def delta_commits_since(location: str, after: str | datetime | None,
                        storage_options: dict[str, Any] | None = None) -> tuple[int, str | None]:
    """Writes completed on the table after `after` (a timeline time, or a moment: a run recorded before
    runs kept the timeline time they counted through), archived ones included, and the timeline time
    no write counted completed after (for TableService triggers: Table.writes_after)."""
    from lakecore import Table
    from lakecore.timeline import format_ms

    if isinstance(after, datetime):   # the end of its second: the status keeps seconds
        after = format_ms(int(after.timestamp()) * 1000 + 999)
    return Table.open(location, storage_options=storage_options).writes_after(after or "")


# -- LakeWriter --------------------------------------------------------------------------------


def reconcile_writer(body: Mapping[str, Any], table_body: Mapping[str, Any] | None, launcher: Launcher,
                     now: datetime, settings: PodSettings, *, applied: Mapping[str, Any] | None = None,
                     source_location: str | None = None, winner_running: bool = False,
                     other_tables: Sequence[str] = ()) -> Outcome:
    """Plan the writer and carry out the plan on `launcher`. `applied`: the spec body the current
    submission runs (None: none yet); `table_body`: its LakeTable (None: not found); `winner_running`:
    the write this writer's current submission lost a conflict to is still running
    (observe.py: `conflict_winner_running`)."""
    admitted = _admit(body, now, parse_lake_writer, table_body, table_ref=lambda s: s.table_ref.name,
                      applied=applied, other_tables=other_tables)
    if isinstance(admitted, Outcome):
        return admitted
    ref, spec, table = admitted
    assert table is not None
    old = body.get("status")
    group_problem = _column_group_problem(spec.column_group, table)
    if group_problem is not None:   # known now, not once its driver started
        return _invalid(ref, SpecError("spec.columnGroup", group_problem), old, now, applied)
    if spec.source.table is not None and source_location is None:   # before anything is stopped
        missing = SpecError("source.table", f"table {spec.source.table.name!r} is not known (yet); create "
                            "that LakeTable in the same namespace")
        return _invalid(ref, missing, old, now, applied)
    observed = replace(read_writer_status(old), winner_running=winner_running,
                       runner_ending=launcher.closed)
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
    """Why a writer's (or a service's) LakeTable cannot take a new submission (or run) yet (None: it
    can). A table the operator does not manage (`weir.dev/managed: "false"`) is taken as it is."""
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
    state = ", ".join(str(s) for s in dict.fromkeys((phase, ready.get("reason"))) if s) or \
        "not reconciled yet"
    why = str(ready.get("message") or status.get("lastError") or "")
    said = f": {why[:300]}{'...' if len(why) > 300 else ''}" if why else ""
    return f"waiting for LakeTable {table.name} to be Ready (it is {state}{said})"


# -- TableService ------------------------------------------------------------------------------


def reconcile_service(body: Mapping[str, Any], table_body: Mapping[str, Any] | None, launcher: Launcher,
                      now: datetime, settings: PodSettings, *,
                      storage_options: Mapping[str, Any] | None = None, other_tables: Sequence[str] = ()
                      ) -> Outcome:
    """Start the service's run when due (never two at once), record how runs ended."""
    from lakeoperator.status import parse_timestamp

    admitted = _admit(body, now, parse_table_service, table_body, table_ref=lambda s: s.table_ref.name,
                      other_tables=other_tables)
    if isinstance(admitted, Outcome):
        return admitted
    ref, spec, table = admitted
    assert table is not None
    old = body.get("status")
    created = parse_timestamp((body.get("metadata") or {}).get("creationTimestamp")) or now
    observed = read_service_status(old, created)
    if observed.active_run is not None:
        pod = launcher.get_pod(ref.namespace, child_name(observed.active_run.id))
        observed = replace(observed, run_pod=observe_pod(pod) if pod is not None else None)
    if spec.trigger is not None:
        last = observed.last_run
        after = (last.counted_through or last.started_at) if last else None
        try:
            commits, through = delta_commits_since(table.location, after, _options(table, storage_options))
            observed = replace(observed, delta_commits_since_last_run=commits, counted_through=through)
        except Exception:  # the table is not there yet: nothing to trigger on
            observed = replace(observed, delta_commits_since_last_run=0)
    plan = plan_service(ref, spec, observed, now)
    waiting = _table_not_ready(table_body)
    if plan.action == ServiceAction.START and plan.active_run is not None and waiting \
            and ((old or {}).get("activeRun") or {}).get("id") != plan.active_run.id:
        # a new run waits for its table, as a writer's new submission does: a refused table (its files do
        # not match its spec) is not touched (a run already recorded goes on: it was decided)
        plan = replace(plan, action=ServiceAction.WAIT, active_run=None, next_run_at=None,
                       reason="TableNotReady", message=waiting, requeue_after=10.0)
    elif waiting and plan.active_run is None and plan.reason != "Suspended":
        # idle between runs: not Ready while its table is not, since its next run would wait too
        plan = replace(plan, reason="TableNotReady", message=waiting,
                       requeue_after=min(plan.requeue_after or 10.0, 10.0))
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
        said = run_ended(plan.finished) if kind == "Warning" else \
            f"run {plan.finished.id}: {plan.finished.outcome.value}"
        events.append((kind, "RunFinished", said))
    return Outcome(status, requeue_after=plan.requeue_after if plan.requeue_after is not None else 1.0,
                   events=tuple(events), done=plan.action.value == "none",
                   submitted=submitted)


__all__ = ["Outcome", "delta_commits_since", "reconcile", "reconcile_service", "reconcile_table",
           "reconcile_writer"]
