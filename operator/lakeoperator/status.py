"""Derived status of the three kinds: phase and conditions from a plan, and the minimal patch to write.

Owns: the condition types (Ready, Progressing, Degraded, ReconciliationPaused, and kstatus' Reconciling
and Stalled, which Flux and other kstatus readers judge a custom resource by) and what each means per
kind, `lastTransitionTime` (moves only when a condition's status flips), `observedGeneration`, the status
of an invalid spec (Ready=False, reason InvalidSpec: reported, never a crash loop) and of a paused
resource, and `status_patch` (None when nothing changed, so no-op patches are skipped).

Must not: call Kubernetes or read the clock (`now` is passed); it never accumulates state: every status is
computed from the plan and the previous status (for transition times and the fields others own, which
are carried over untouched: currentInstant, lastCommit, lastConflict of writers, set by supervision).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from lakeoperator.plan.service import ActiveRun, RunRecord, ServiceObserved, ServicePlan, failed
from lakeoperator.plan.table import TableAction, TablePlan
from lakeoperator.plan.writer import (
    TERMINAL,
    Action,
    AttemptRecord,
    Attempts,
    Cause,
    WriterObserved,
    WriterPhase,
    WriterPlan,
)
from lakeoperator.specs import ObjectRef, SpecError

ConditionType = Literal["Ready", "Progressing", "Degraded", "ReconciliationPaused", "Reconciling", "Stalled"]
ConditionStatus = Literal["True", "False", "Unknown"]
CONDITION_TYPES: tuple[ConditionType, ...] = ("Ready", "Progressing", "Degraded", "ReconciliationPaused",
                                              "Reconciling", "Stalled")
WRITER_HISTORY_LIMIT = 10


@dataclass(frozen=True)
class Condition:
    type: ConditionType
    status: ConditionStatus
    reason: str
    message: str = ""


def timestamp(at: datetime) -> str:
    """RFC 3339 in UTC, seconds precision (what Kubernetes' metav1.Time holds)."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def timestamp_not_before(at: datetime) -> str:
    """`timestamp`, rounded up to the next second: for a time that must not be reached early (a backoff's
    end), since the status holds seconds and the plan is read back from it."""
    whole = at.replace(microsecond=0)
    return timestamp(whole if whole == at else whole + timedelta(seconds=1))


def parse_timestamp(text: str | None) -> datetime | None:
    if not text:
        return None
    at = datetime.fromisoformat(text)
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def merge_conditions(old: Sequence[Mapping[str, Any]] | None, new: Sequence[Condition], now: datetime,
                     generation: int) -> list[dict[str, Any]]:
    """Conditions as status holds them, in CONDITION_TYPES order; a condition keeps its
    lastTransitionTime unless its status flipped."""
    before = {c.get("type"): c for c in old or ()}
    out = []
    for c in sorted(new, key=lambda c: CONDITION_TYPES.index(c.type)):
        prev = before.get(c.type)
        since = prev.get("lastTransitionTime") if prev is not None and prev.get("status") == c.status \
            else None   # a new condition, or its status flipped
        out.append({"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
                    "lastTransitionTime": since or timestamp(now), "observedGeneration": generation})
    return out


def _flag(value: bool) -> ConditionStatus:
    return "True" if value else "False"


def _paused(ref: ObjectRef) -> Condition:
    if ref.paused:
        return Condition("ReconciliationPaused", "True", "Paused",
                         "annotation weir.dev/paused is \"true\"; remove it to resume reconciliation")
    return Condition("ReconciliationPaused", "False", "Reconciling")


def kstatus_conditions(*, reconciling: bool, stalled: bool, reason: str,
                       message: str) -> tuple[Condition, Condition]:
    """kstatus' abnormal-true conditions (sigs.k8s.io/cli-utils pkg/kstatus), which Flux's health checks
    read: Reconciling True -> InProgress (the operator still works towards the spec, and will get there
    without a change), Stalled True -> Failed (it cannot get there until the spec or the world changes);
    neither -> Current, once status.observedGeneration equals metadata.generation. Never both: kstatus
    takes the first True one it finds, and a resource that waits for a change is stalled, not reconciling."""
    reconciling = reconciling and not stalled
    return (Condition("Reconciling", _flag(reconciling), reason if reconciling else "AsExpected",
                      message if reconciling else ""),
            Condition("Stalled", _flag(stalled), reason if stalled else "AsExpected",
                      message if stalled else ""))


def _with(old: Mapping[str, Any] | None, ref: ObjectRef, now: datetime, conditions: Sequence[Condition],
          fields: Mapping[str, Any]) -> dict[str, Any]:
    status = dict(old or {})
    status.update(fields)
    status["conditions"] = merge_conditions((old or {}).get("conditions"), conditions, now, ref.generation)
    status["observedGeneration"] = ref.generation
    return status


# -- LakeWriter --------------------------------------------------------------------------------

# phase -> (Ready, Progressing, Degraded)
_WRITER: dict[WriterPhase, tuple[bool, bool, bool]] = {
    WriterPhase.PENDING: (False, True, False),
    WriterPhase.SUBMITTED: (False, True, False),
    WriterPhase.RUNNING: (True, False, False),
    WriterPhase.BACKING_OFF: (False, True, True),
    WriterPhase.SUCCEEDED: (True, False, False),
    WriterPhase.FAILED: (False, False, True),
    WriterPhase.ABORTED: (False, False, True),
    WriterPhase.SUSPENDED: (False, False, False),
}


def writer_conditions(ref: ObjectRef, plan: WriterPlan) -> tuple[Condition, ...]:
    ready, progressing, degraded = _WRITER[plan.phase]
    if plan.phase == WriterPhase.RUNNING and plan.reason != "Running":
        ready, progressing = False, True          # the driver runs but is not ready yet
    if plan.refused_change is not None:
        why, says = "SpecChangeRefused", plan.refused_change
    else:
        why, says = (plan.reason, plan.message) if degraded else ("AsExpected", "")
    # a failed or aborted writer, or a refused change, waits for a spec change (restartNonce, a revert);
    # on its way to the spec: a writer deleting a driver (to suspend or restart), and one whose next
    # submission is held back (its table is not Ready) whatever phase it is still in
    held = plan.action == Action.WAIT and plan.phase in (WriterPhase.FAILED, WriterPhase.ABORTED,
                                                         WriterPhase.SUSPENDED)
    stalled = (plan.phase in (WriterPhase.FAILED, WriterPhase.ABORTED) and not held) \
        or plan.refused_change is not None
    return (Condition("Ready", _flag(ready), plan.reason, plan.message),
            Condition("Progressing", _flag(progressing), plan.reason, plan.message if progressing else ""),
            Condition("Degraded", _flag(degraded or plan.refused_change is not None), why, says),
            _paused(ref),
            *kstatus_conditions(reconciling=progressing or held or plan.action == Action.DELETE_DRIVER,
                                stalled=stalled, reason=why if stalled else plan.reason,
                                message=says if stalled else plan.message))


def attempt_json(r: AttemptRecord) -> dict[str, Any]:
    """status.history[]: exitCode and startedAt absent when unknown (a driver that never ran, or was lost)."""
    return {"attempt": r.attempt, "submissionId": r.submission_id, "cause": r.cause.value,
            **({"exitCode": r.exit_code} if r.exit_code is not None else {}),
            **({"startedAt": timestamp(r.started_at)} if r.started_at else {}),
            "finishedAt": timestamp(r.finished_at)}


def writer_status(ref: ObjectRef, plan: WriterPlan, old: Mapping[str, Any] | None, now: datetime, *,
                  driver_pod: str | None = None) -> dict[str, Any]:
    """The LakeWriter status after `plan` (write it BEFORE acting on the plan). A writer that stays in a
    terminal phase keeps the reason and message it ended with (the planner does not repeat them)."""
    if plan.phase in TERMINAL and plan.action == Action.NONE and not plan.message and old:
        ended = next((c for c in old.get("conditions") or () if c.get("type") == "Ready"), None)
        if ended is not None and old.get("phase") == plan.phase.value and ended.get("message"):
            plan = replace(plan, reason=str(ended.get("reason") or plan.reason),
                           message=str(ended["message"]))
    history = list((old or {}).get("history") or [])
    if plan.finished is not None and all(h.get("submissionId") != plan.finished.submission_id
                                         for h in history):
        history.append(attempt_json(plan.finished))
    a = plan.attempts
    conflict: dict[str, Any] = {}
    current = (old or {}).get("lastConflict") or {}
    if plan.conflict is not None and any(current.get(k) != plan.conflict.get(k)
                                         for k in ("role", "instant", "other")):
        conflict = {"lastConflict": {**plan.conflict, "at": timestamp(now),
                                     **({"submission": plan.submission_id} if plan.submission_id else {})}}
    return _with(old, ref, now, writer_conditions(ref, plan), {
        **conflict,
        "phase": plan.phase.value,
        "attempts": {"total": a.total, "failures": a.failures, "infraFailures": a.infra_failures,
                     "conflicts": a.conflicts, "unavailable": a.unavailable},
        "history": history[-WRITER_HISTORY_LIMIT:],
        "submissionId": plan.submission_id,
        "submittedAt": timestamp(plan.submitted_at) if plan.submitted_at else None,
        "driverPod": driver_pod,
        "nextRetryAt": timestamp_not_before(plan.next_retry_at) if plan.next_retry_at else None,
    })


# -- TableService ------------------------------------------------------------------------------


# the cron slot and exit code of a run are not kept in status (the CRD has no field for them): the next
# slot is computed from the run's start, which lies in the slot it ran for
def run_json(r: RunRecord) -> dict[str, Any]:
    return {"id": r.id, "startedAt": timestamp(r.started_at), "finishedAt": timestamp(r.finished_at),
            "outcome": r.outcome.value, "instant": r.instant, **({"message": r.error} if r.error else {}),
            **({"countedThrough": r.counted_through} if r.counted_through else {})}


def run_ended(r: RunRecord) -> str:
    """How a run ended, with the job's own error when it names one (what broke and what to do)."""
    said = f"run {r.id} ended with {r.outcome.value}"
    return f"{said}: {r.error}" if r.error else f"{said}; see its pod's log"


def active_run_json(r: ActiveRun, driver_pod: str | None = None) -> dict[str, Any]:
    return {"id": r.id, "submissionId": r.id, "driverPod": driver_pod, "startedAt": timestamp(r.started_at),
            **({"countedThrough": r.counted_through} if r.counted_through else {})}


def service_conditions(ref: ObjectRef, plan: ServicePlan) -> tuple[Condition, ...]:
    last = plan.history[-1] if plan.history else None
    bad = last is not None and failed(last)
    idle = plan.reason in ("Suspended", "TableNotReady")   # no run starts
    return (Condition("Ready", _flag(not idle), plan.reason, plan.message),
            Condition("Progressing", _flag(plan.active_run is not None), plan.reason,
                      plan.message if plan.active_run is not None else ""),
            Condition("Degraded", _flag(bad), "LastRunFailed" if bad else "AsExpected",
                      run_ended(last) if bad and last is not None else ""),
            _paused(ref),
            # a service's spec is in effect once its schedule is: runs (and a failed one, Degraded) are
            # its normal life, not progress towards the spec, so kstatus sees it Current
            *kstatus_conditions(reconciling=False, stalled=False, reason=plan.reason, message=""))


def service_status(ref: ObjectRef, plan: ServicePlan, old: Mapping[str, Any] | None, now: datetime, *,
                   driver_pod: str | None = None) -> dict[str, Any]:
    """The TableService status after `plan` (write it BEFORE starting the run it names)."""
    return _with(old, ref, now, service_conditions(ref, plan), {
        "lastRun": run_json(plan.history[-1]) if plan.history else None,
        "nextRunAt": timestamp(plan.next_run_at) if plan.next_run_at else None,
        "activeRun": active_run_json(plan.active_run, driver_pod) if plan.active_run else None,
        "history": [run_json(r) for r in plan.history],
        "lastError": None,   # planned: the spec holds (an error of a spec since fixed is not left)
    })


# -- LakeTable ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableInfo:
    """What lakecore reports about a ready table (read side). `latest_instant`: the latest completed
    instant by completion time (Timeline.last_completed), so with concurrent writers an older instant
    that completes after a younger one is the latest; `latest_instant_time` never goes back."""

    latest_instant: str | None = None
    latest_instant_time: datetime | None = None
    latest_action: str | None = None      # the action of latest_instant (commit, rollback, ...)
    pending_compactions: int = 0
    active_writers: int = 0
    lost_writes: tuple[str, ...] | None = ()   # writes that completed and lost their completed instant file
                                                # (None: unknown, the look failed; the status keeps its list)


def table_status(ref: ObjectRef, plan: TablePlan, old: Mapping[str, Any] | None, now: datetime, *,
                 info: TableInfo | None = None, error: str | None = None,
                 location: str | None = None, error_reason: str | None = None) -> dict[str, Any]:
    """The LakeTable status after carrying out `plan` (info: the table as read after; error: the action
    failed, with a message that ends in a remedy, `error_reason` its reason (ReconcileFailed unless
    given); location: the table's URI, recorded once it was created or adopted there)."""
    refused = plan.action == TableAction.REFUSE
    if refused:
        reason, message = "ConfigMismatch", "; ".join(m.message for m in plan.refused)
    elif error is not None:
        reason, message = error_reason or "ReconcileFailed", error
    elif info is None:
        reason, message = "Creating" if plan.action == TableAction.CREATE else "Adopting", ""
    else:
        reason, message = "TableReady", ""
    phase = "Failed" if refused or error else "Ready" if info is not None else "Pending"
    failed = phase == "Failed"
    known = info.lost_writes if info is not None and info.lost_writes is not None else \
        tuple((old or {}).get("lostWrites") or ())
    lost = lost_writes_message(location, known) if info is not None and not failed else None
    degraded = "CompletedFileLost" if lost else reason if failed else "AsExpected"
    conditions = (Condition("Ready", _flag(phase == "Ready"), reason, message),
                  Condition("Progressing", _flag(phase == "Pending"), reason, ""),
                  Condition("Degraded", _flag(failed or bool(lost)), degraded,
                            lost or (message if failed else "")),
                  _paused(ref),
                  # a storage error is retried (it may heal); a config mismatch waits for a spec change
                  *kstatus_conditions(reconciling=phase == "Pending" or error is not None, stalled=refused,
                                      reason=reason, message=message))
    i = info or TableInfo()
    return _with(old, ref, now, conditions, {
        "phase": phase,
        "latestInstant": i.latest_instant,
        "latestAction": i.latest_action,
        "latestInstantTime": timestamp(i.latest_instant_time) if i.latest_instant_time else None,
        "pendingCompactions": i.pending_compactions, "activeWriters": i.active_writers,
        # set while there are some; null (a merge patch deletes it) once there are none
        **({"lostWrites": list(known) or None}
           if info is not None and (known or (old or {}).get("lostWrites")) else {}),
        "lastError": message if phase == "Failed" else None,
        **({"location": location} if location is not None and info is not None else {}),
    })


def lost_writes_message(location: str | None, lost: tuple[str, ...]) -> str | None:
    """What the Degraded condition says of writes whose completed instant file was lost (None: none)."""
    if not lost:
        return None
    uri = location or "URI"
    return (f"write(s) {', '.join(lost)} completed, but their completed instant file is lost: their rows "
            f"are not read, and nothing rolls them back. `weir table check {uri}` says what to do: restore "
            f"the file from a backup, or `weir table repair {uri} --run --complete-lost T` if the write "
            f"completed, `weir table rollback {uri} T --yes` if it did not")


def deleting_status(ref: ObjectRef, old: Mapping[str, Any] | None, message: str, now: datetime
                    ) -> dict[str, Any]:
    """The LakeTable status while its deletion (deletionPolicy Delete) waits for the LakeWriters and
    TableServices that still refer to it: phase Deleting, not Ready (no new submission starts on it),
    Progressing towards its deletion; the message names them and what to do."""
    reason = "DeletionWaiting"
    conditions = (Condition("Ready", "False", reason, message), Condition("Progressing", "True", reason, ""),
                  Condition("Degraded", "False", "AsExpected", ""), _paused(ref),
                  *kstatus_conditions(reconciling=True, stalled=False, reason=reason, message=message))
    return _with(old, ref, now, conditions, {"phase": "Deleting", "lastError": message})


# the LakeTable status fields derived from its timeline (TableInfo, and what publishing shows): a commit
# changes them, nothing else
TIMELINE_FIELDS = ("latestInstant", "latestAction", "latestInstantTime", "pendingCompactions",
                   "activeWriters", "published", "publishedInstant")


def location_in_use_status(ref: ObjectRef, old: Mapping[str, Any] | None, location: str, rival: str,
                           now: datetime) -> dict[str, Any]:
    """The LakeTable status when another LakeTable of its namespace manages the table at its location
    (or was made first): nothing is touched there, and deleting this one never deletes that data."""
    reason = "LocationInUse"
    message = (f"LakeTable {rival} manages the table at {location} already; two LakeTables of one table "
               f"would each act on it (deleting either with deletionPolicy Delete would delete the other's "
               f"data): use LakeTable {rival}, or give this one another location")
    conditions = (Condition("Ready", "False", reason, message), Condition("Progressing", "False", reason, ""),
                  Condition("Degraded", "True", reason, message), _paused(ref),
                  *kstatus_conditions(reconciling=False, stalled=True, reason=reason, message=message))
    return _with(old or {}, ref, now, conditions, {"phase": "Failed", "lastError": message})


def location_changed_status(ref: ObjectRef, old: Mapping[str, Any], location: str, now: datetime
                            ) -> dict[str, Any]:
    """The LakeTable status when spec.location no longer names the table recorded in status.location:
    nothing is touched at either location until spec.location names it again."""
    recorded = str(old.get("location"))
    reason = "LocationChanged"
    message = (f"spec.location changed from {recorded} to {location}; a table does not move: set "
               f"spec.location back to {recorded} (to use {location}, create a new LakeTable and copy "
               "the data)")
    conditions = (Condition("Ready", "False", reason, message), Condition("Progressing", "False", reason, ""),
                  Condition("Degraded", "True", reason, message), _paused(ref),
                  *kstatus_conditions(reconciling=False, stalled=True, reason=reason, message=message))
    return _with(old, ref, now, conditions, {"phase": "Failed", "lastError": message})


# -- reading back ------------------------------------------------------------------------------


def read_writer_status(status: Mapping[str, Any] | None) -> WriterObserved:
    """The planner's view of a LakeWriter's status (driver and change are the handler's to add)."""
    s = status or {}
    a = s.get("attempts") or {}
    try:
        phase = WriterPhase(s.get("phase") or WriterPhase.PENDING)
    except ValueError:
        phase = WriterPhase.PENDING
    return WriterObserved(
        phase=phase,
        attempts=Attempts(total=int(a.get("total") or 0), failures=int(a.get("failures") or 0),
                          infra_failures=int(a.get("infraFailures") or 0),
                          conflicts=int(a.get("conflicts") or 0),
                          unavailable=int(a.get("unavailable") or 0)),
        submission_id=s.get("submissionId"), submitted_at=parse_timestamp(s.get("submittedAt")),
        next_retry_at=parse_timestamp(s.get("nextRetryAt")), lost_conflict=lost_conflict(s) is not None)


def retried_writer_status(status: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The status of a writer that ended Failed or Aborted when it is asked to run again with its spec
    unchanged (`weir run` started again once its input was fixed): Pending, with fresh budgets as a new
    spec.restartNonce gives (attempts.total and the history kept, so submission ids stay unique); its old
    driver is deleted before the next submission. None for a writer in any other phase."""
    s = dict(status or {})
    if s.get("phase") not in (WriterPhase.FAILED, WriterPhase.ABORTED):
        return None
    total = int((s.get("attempts") or {}).get("total") or 0)
    s.update(phase=WriterPhase.PENDING.value, nextRetryAt=None,
             attempts={"total": total, "failures": 0, "infraFailures": 0, "conflicts": 0, "unavailable": 0})
    return s


def lost_conflict(status: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """status.lastConflict when the supervisor aborted the write of the current submission (not void)."""
    c = (status or {}).get("lastConflict") or {}
    if c.get("role") == "Lost" and not c.get("void") and c.get("submission") \
            and c.get("submission") == (status or {}).get("submissionId"):
        return dict(c)
    return None


def read_service_status(status: Mapping[str, Any] | None, created_at: datetime) -> ServiceObserved:
    """The planner's view of a TableService's status (run pod and delta commits are the handler's to add)."""
    s = status or {}
    active = s.get("activeRun")
    return ServiceObserved(
        created_at=created_at,
        active_run=ActiveRun(id=active["id"], started_at=_time(active["startedAt"]),
                             counted_through=active.get("countedThrough")) if active else None,
        history=tuple(RunRecord(id=r["id"], started_at=_time(r["startedAt"]),
                                finished_at=_time(r["finishedAt"]), outcome=Cause(r["outcome"]),
                                instant=r.get("instant"), error=r.get("message"),
                                counted_through=r.get("countedThrough"))
                      for r in s.get("history") or ()))


def _time(text: str) -> datetime:
    at = parse_timestamp(text)
    assert at is not None
    return at


# -- any kind ----------------------------------------------------------------------------------


def invalid_spec_status(ref: ObjectRef, error: SpecError, old: Mapping[str, Any] | None,
                        now: datetime) -> dict[str, Any]:
    """An invalid spec is reported (Ready=False, InvalidSpec, Degraded) and not retried until it changes;
    the phase and the rest of the status stay as they were (a running writer is left alone)."""
    message = str(error)
    return _with(old, ref, now, (
        Condition("Ready", "False", "InvalidSpec", message),
        Condition("Progressing", "False", "InvalidSpec", ""),
        Condition("Degraded", "True", "InvalidSpec", message),
        _paused(ref),
        *kstatus_conditions(reconciling=False, stalled=True, reason="InvalidSpec", message=message)),
        {"lastError": message})


def paused_status(ref: ObjectRef, old: Mapping[str, Any] | None, now: datetime) -> dict[str, Any]:
    """Paused (or resumed without a plan yet): only ReconciliationPaused changes; observedGeneration stays,
    since this generation was not reconciled."""
    status = dict(old or {})
    kept = [c for c in status.get("conditions") or () if c.get("type") != "ReconciliationPaused"]
    mine = merge_conditions(status.get("conditions"), (_paused(ref),), now,
                            int(status.get("observedGeneration") or 0))
    status["conditions"] = sorted([*kept, *mine], key=lambda c: CONDITION_TYPES.index(c["type"])
                                  if c.get("type") in CONDITION_TYPES else len(CONDITION_TYPES))
    return status


def ended_attempts(kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Causes of the attempts (writers) or runs (services) that ended between two statuses."""
    field = "submissionId" if kind == "LakeWriter" else "id"
    cause = "cause" if kind == "LakeWriter" else "outcome"
    seen = {h.get(field) for h in old.get("history") or ()}
    return [str(h.get(cause)) for h in new.get("history") or () if h.get(field) not in seen]


def status_patch(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any] | None:
    """A JSON merge patch (RFC 7386) from `old` to `new`; None when they are equal (skip the request).
    Lists are replaced whole; a key `new` dropped is set to None (deleted)."""
    old = old or {}
    patch: dict[str, Any] = {}
    for key, value in new.items():
        before = old.get(key)
        if before == value and key in old:
            continue
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            sub = status_patch(before, value)
            if sub is not None:
                patch[key] = sub
        elif not (value is None and key not in old):
            patch[key] = value
    for key in old:
        if key not in new:
            patch[key] = None
    return patch or None
