"""The LakeWriter state machine: from what was observed, what to do next (pure).

Owns: `plan_writer` (submit / wait / delete the driver / back off / finish), the exit classification
(`classify_exit`, from sparkjobs.contract's exit codes plus infrastructure causes), the restart policy
(budgets, capped exponential backoff, reset after stable running), suspend/resume, restartNonce, start and
ready timeouts, deterministic submission ids, and `classify_change` (which spec changes restart the
writer, which apply in place, which are refused).

Must not: call Kubernetes, read the clock, or build pods. The handler writes the plan's status (with the
submission id) BEFORE it acts, and a driver pod's name derives from its submission id, so re-running a
plan after a crash or an operator restart never submits a job twice.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Any, Literal, get_args

from lakeoperator.specs import LakeWriterSpec, ObjectRef, RestartPolicySpec
from sparkjobs.contract import (
    EXIT_BAD_INPUT,
    EXIT_BUSY,
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
)


class Cause(enum.StrEnum):
    """Why an attempt ended (status.history[].cause)."""

    SUCCESS = "success"
    FAILURE = "failure"
    BAD_INPUT = "badInput"
    CONFLICT = "conflict"
    BUSY = "busy"
    INFRASTRUCTURE = "infrastructure"
    UNAVAILABLE = "unavailable"     # the source did not answer (no Kafka broker): retried, no budget spent


class WriterPhase(enum.StrEnum):
    PENDING = "Pending"          # nothing submitted yet
    SUBMITTED = "Submitted"      # submission id recorded; the driver pod is being created or starting
    RUNNING = "Running"          # the driver runs
    BACKING_OFF = "BackingOff"   # an attempt ended; the next one starts at nextRetryAt
    SUCCEEDED = "Succeeded"      # the job finished (batch, availableNow)
    FAILED = "Failed"            # bad input, a budget exhausted, or restartPolicy Never
    ABORTED = "Aborted"          # lost a conflict with onConflict Abort
    SUSPENDED = "Suspended"      # spec.state Suspended: no driver


TERMINAL = frozenset({WriterPhase.SUCCEEDED, WriterPhase.FAILED, WriterPhase.ABORTED})


class Action(enum.StrEnum):
    SUBMIT = "submit"                # create the driver named after plan.submission_id (idempotent)
    WAIT = "wait"                    # nothing to do; plan again after plan.requeue_after
    DELETE_DRIVER = "deleteDriver"   # delete observed.driver (stale, suspended, timed out or replaced)
    NONE = "none"                    # settled (terminal, suspended, refused change)


Change = Literal["none", "in_place", "restart", "refused"]

WINNER_RECHECK_S = 2.0   # a loser waiting for the winner looks again this often

# pod-level reasons (pod.status.reason or a container's terminated reason) that mean the platform, not the
# job, ended the attempt
INFRA_REASONS = frozenset({"OOMKilled", "Evicted", "NodeLost", "NodeShutdown", "Preempting", "Shutdown",
                           "Terminated",
                           "DriverLost", "StartTimeout", "ReadyTimeout", "UnexpectedAdmissionError"})
# the terminated reason `weir run`'s launcher gives a driver it stopped because the run ended (Ctrl-C,
# the end of a run with a stream in it): no failure of the job, nor of the platform
STOPPED_BY_RUNNER = "Stopped"
# how a writer that ended is run again (told with the reason it ended); `weir run` does it when started
# again too (local.retry_failed_writers)
RERUN = "change spec.restartNonce (with `weir run`: or start it again)"
# container waiting reasons that will not resolve by waiting; still bounded by startTimeoutSeconds, since
# an image may yet be pushed or a Secret created
STUCK_WAITING_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName",
                                   "CreateContainerConfigError", "CreateContainerError"})


def classify_exit(exit_code: int | None, pod_reason: str | None = None) -> Cause:
    """An attempt's end -> its cause. Infrastructure first: an OOM kill exits 137, an eviction has no code."""
    if pod_reason in INFRA_REASONS:
        return Cause.INFRASTRUCTURE
    if exit_code is None or exit_code > 128 or exit_code < 0:   # lost, or killed by signal 128+n
        return Cause.INFRASTRUCTURE
    return {EXIT_OK: Cause.SUCCESS, EXIT_FAILED: Cause.FAILURE, EXIT_BAD_INPUT: Cause.BAD_INPUT,
            EXIT_CONFLICT: Cause.CONFLICT, EXIT_BUSY: Cause.BUSY,
            EXIT_UNAVAILABLE: Cause.UNAVAILABLE}.get(exit_code, Cause.FAILURE)


# -- spec changes --------------------------------------------------------------------------------

# LakeWriterSpec field -> what changing it does to a running writer
CHANGE_CLASS: dict[str, Change] = {
    "table_ref": "refused", "mode": "refused",
    "source": "restart", "operation": "restart", "column_group": "restart", "trigger": "restart",
    "spark": "restart", "restart_nonce": "restart",
    "restart_policy": "in_place", "start_timeout_seconds": "in_place", "ready_timeout_seconds": "in_place",
    "state": "in_place",   # suspend/resume is its own transition, not a restart
}
assert set(CHANGE_CLASS) == {f.name for f in fields(LakeWriterSpec)}
_RANK: dict[Change, int] = {"none": 0, "in_place": 1, "restart": 2, "refused": 3}


def changed_fields(old: LakeWriterSpec, new: LakeWriterSpec) -> tuple[str, ...]:
    return tuple(f.name for f in fields(LakeWriterSpec) if getattr(old, f.name) != getattr(new, f.name))


def classify_change(old: LakeWriterSpec, new: LakeWriterSpec) -> Change:
    """The strongest class among the changed fields (refused > restart > in_place > none)."""
    return max((CHANGE_CLASS[name] for name in changed_fields(old, new)), key=_RANK.__getitem__,
               default="none")


# -- observation and plan ----------------------------------------------------------------------


@dataclass(frozen=True)
class Attempts:
    total: int = 0          # every submission ever (never reset: it numbers the submissions)
    failures: int = 0       # since the last reset: spent of restartPolicy.maxRestarts
    infra_failures: int = 0  # since the last reset: spent of restartPolicy.maxInfraRestarts
    conflicts: int = 0      # since the last reset (no budget; drives the backoff)
    unavailable: int = 0    # since the last reset: the source did not answer (no budget; drives the backoff)

    def reset(self) -> Attempts:
        return Attempts(total=self.total)


PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]


@dataclass(frozen=True)
class DriverObservation:
    """The driver pod as last seen."""

    submission_id: str | None            # its label: which submission it runs
    phase: PodPhase
    reason: str | None = None            # pod.status.reason or the container's terminated reason
    exit_code: int | None = None         # the driver container's exit code once terminated
    waiting_reason: str | None = None    # the container's waiting reason (ImagePullBackOff, ...)
    started_at: datetime | None = None   # the container's running-since
    ready: bool = False
    created_at: datetime | None = None   # metadata.creationTimestamp
    message: str | None = None           # the terminated container's message (the job's JSON outcome)


# the label a driver (or service run) pod carries: the submission (run) id it executes; builders set it
SUBMISSION_LABEL = "weir.dev/submission-id"
DRIVER_CONTAINER = "driver"      # the container whose state is the attempt's (else the first one)


def observe_pod(pod: Mapping[str, Any]) -> DriverObservation:
    """A pod body (as the API returns it) -> what the planners need of it."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = pod.get("status") or {}
    phase: PodPhase = status["phase"] if status.get("phase") in get_args(PodPhase) else "Pending"
    containers = status.get("containerStatuses") or []
    main = next((c for c in containers if c.get("name") == DRIVER_CONTAINER), containers[0] if containers
                else {})
    state = main.get("state") or {}
    waiting, running_, terminated = (state.get(k) or {} for k in ("waiting", "running", "terminated"))
    started = running_.get("startedAt") or terminated.get("startedAt")
    created = meta.get("creationTimestamp")
    exit_code = terminated.get("exitCode")
    return DriverObservation(
        submission_id=labels.get(SUBMISSION_LABEL), phase=phase,
        reason=status.get("reason") or terminated.get("reason"),
        exit_code=int(exit_code) if exit_code is not None else None,
        waiting_reason=waiting.get("reason"),
        started_at=datetime.fromisoformat(started) if started else None,
        ready=bool(main.get("ready")),
        created_at=datetime.fromisoformat(created) if created else None,
        message=terminated.get("message") or None)


@dataclass(frozen=True)
class WriterObserved:
    """What the handler saw: the current status and the driver pod, and how the spec changed since the
    spec the current submission runs (`classify_change`)."""

    phase: WriterPhase = WriterPhase.PENDING
    attempts: Attempts = Attempts()
    submission_id: str | None = None
    submitted_at: datetime | None = None
    next_retry_at: datetime | None = None
    change: Change = "none"
    driver: DriverObservation | None = None
    lost_conflict: bool = False   # the supervisor aborted the current submission's write (lastConflict)
    winner_running: bool = False  # ... and the write it lost to still runs: a restart waits for it
    runner_ending: bool = False   # `weir run` is ending: its launcher starts no driver any more


@dataclass(frozen=True)
class AttemptRecord:
    """One finished attempt (status.history[])."""

    attempt: int
    submission_id: str
    cause: Cause
    exit_code: int | None
    started_at: datetime | None
    finished_at: datetime


@dataclass(frozen=True)
class WriterPlan:
    """What to record in status (before acting) and what to do."""

    action: Action
    phase: WriterPhase
    reason: str                      # CamelCase, for conditions and Events
    message: str
    attempts: Attempts
    submission_id: str | None
    submitted_at: datetime | None = None
    next_retry_at: datetime | None = None
    finished: AttemptRecord | None = None   # append to status.history
    requeue_after: float | None = None      # seconds until the next plan is due (timeouts, backoff)
    adopt_spec: bool = False                # record the current spec as the one the writer runs
    refused_change: str | None = None       # why the spec's latest change is not applied (Degraded)
    conflict: Mapping[str, Any] | None = None  # a conflict the job found itself: status.lastConflict


def submission_id(ref: ObjectRef, attempt: int) -> str:
    """Deterministic per (object, generation, attempt), DNS-label safe, short enough for a pod name
    suffix: `<name[:40]>-<attempt>-<8 hex>`."""
    digest = hashlib.sha256(f"{ref.uid}/{ref.generation}/{attempt}".encode()).hexdigest()[:8]
    return f"{ref.name[:40].rstrip('-.').lower()}-{attempt}-{digest}"


def backoff_seconds(policy: RestartPolicySpec, restarts: int) -> float:
    """The wait before restart number `restarts + 1`: initial * factor^restarts, capped at max."""
    b = policy.backoff
    if restarts >= 64:          # factor^n overflows long after the cap is reached
        return b.max_seconds
    return float(min(b.initial_seconds * b.factor ** restarts, b.max_seconds))


def plan_writer(ref: ObjectRef, spec: LakeWriterSpec, observed: WriterObserved, now: datetime) -> WriterPlan:
    """The next step of one LakeWriter (see the module docstring).

    A refused change (tableRef, mode) does not stop the writer: it goes on as before, the spec is not
    adopted (the handler keeps building from the applied spec), and `refused_change` says why (Degraded).
    The planner reads neither refused field, so planning with the new spec plans the applied one."""
    if observed.change == "refused":
        plan = _plan(ref, spec, replace(observed, change="none"), now)
        return replace(plan, adopt_spec=False, refused_change=(
            "a change to tableRef or mode was refused (they are immutable); revert it, or create a new "
            "LakeWriter"))
    plan = _plan(ref, spec, observed, now)
    if observed.runner_ending and plan.action == Action.SUBMIT:
        # the run ended before this driver started: nothing is submitted, the next run starts it
        return replace(plan, action=Action.NONE, phase=WriterPhase.PENDING, reason="Stopped",
                       message="`weir run` ended before its driver started; it starts when `weir run` does",
                       attempts=observed.attempts, submission_id=observed.submission_id,
                       submitted_at=observed.submitted_at, requeue_after=None, adopt_spec=False)
    return plan


def _plan(ref: ObjectRef, spec: LakeWriterSpec, observed: WriterObserved, now: datetime) -> WriterPlan:
    o = observed
    keep = WriterPlan(action=Action.NONE, phase=o.phase, reason=o.phase.value, message="",
                      attempts=o.attempts, submission_id=o.submission_id, submitted_at=o.submitted_at,
                      next_retry_at=o.next_retry_at)
    driver_active = o.driver is not None and o.driver.phase in ("Pending", "Running", "Unknown")

    if spec.state == "Suspended":
        if o.driver is not None:
            return replace(keep, action=Action.DELETE_DRIVER, phase=WriterPhase.SUSPENDED,
                           reason="Suspending", message="spec.state is Suspended: deleting the driver",
                           next_retry_at=None)
        return replace(keep, phase=WriterPhase.SUSPENDED, reason="Suspended", next_retry_at=None,
                       message="spec.state is Suspended; set it to Running to resume")
    if o.phase == WriterPhase.SUSPENDED or o.change == "restart":
        # resume, or a spec change (restartNonce included) that needs a new driver: a user's decision,
        # so the budgets start afresh
        why = "Resuming" if o.phase == WriterPhase.SUSPENDED else "SpecChanged"
        if driver_active:
            return replace(keep, action=Action.DELETE_DRIVER, reason=why,
                           message="the spec changed in a way that needs a new driver: deleting the old one")
        # the spec is adopted only with the new submission: adopted while the old driver is being deleted,
        # the next pass would see no change any more and the restart would be lost. Meanwhile the writer
        # is Pending, not still Failed: it is on its way to a new attempt and waits for no further change
        plan = _submit(ref, spec, replace(o, attempts=o.attempts.reset()), now, why, o.driver is not None,
                       adopt=False)
        return replace(plan, phase=WriterPhase.PENDING) if plan.action == Action.DELETE_DRIVER else plan
    adopt = o.change == "in_place"
    keep = replace(keep, adopt_spec=adopt)

    if o.phase in TERMINAL:
        return keep
    if o.phase == WriterPhase.PENDING or o.submission_id is None:
        return _submit(ref, spec, o, now, "Submitting", o.driver is not None, adopt)
    if o.phase == WriterPhase.BACKING_OFF:
        if o.next_retry_at is not None and now < o.next_retry_at:
            return replace(keep, action=Action.WAIT, reason="BackingOff",
                           message=f"next attempt at {o.next_retry_at.isoformat()}",
                           requeue_after=(o.next_retry_at - now).total_seconds())
        if o.winner_running:
            return replace(keep, action=Action.WAIT, reason="WaitingForWinner",
                           message="restarting once the write this writer lost a conflict to has finished",
                           requeue_after=WINNER_RECHECK_S)
        return _submit(ref, spec, o, now, "Restarting", o.driver is not None, adopt)

    # Submitted or Running: our submission id is recorded
    d = o.driver
    if d is not None and d.submission_id != o.submission_id:
        return replace(keep, action=Action.DELETE_DRIVER, reason="StaleDriver",
                       message=f"a driver of another submission ({d.submission_id}) is present: deleting it")
    if d is None:
        if o.phase == WriterPhase.SUBMITTED:
            deadline = (o.submitted_at or now) + timedelta(seconds=spec.start_timeout_seconds)
            if now >= deadline:
                return _ended(spec, o, now, Cause.INFRASTRUCTURE, None, None, "StartTimeout",
                              "the driver pod was never created", delete=False, adopt=adopt)
            # status was written but the pod not (yet) created: create it, under the same name
            return replace(keep, action=Action.SUBMIT, phase=WriterPhase.SUBMITTED, reason="Submitting",
                           message=f"creating the driver of submission {o.submission_id}",
                           requeue_after=(deadline - now).total_seconds())
        if o.lost_conflict:
            return _ended(spec, o, now, Cause.CONFLICT, None, None, "Conflict",
                          "the driver was stopped: its write lost a conflict", delete=False, adopt=adopt)
        return _ended(spec, o, now, Cause.INFRASTRUCTURE, None, None, "DriverLost",
                      "the driver pod disappeared while running", delete=False, adopt=adopt)
    if d.phase == "Failed" and d.reason == STOPPED_BY_RUNNER and not o.lost_conflict:
        # the run it belongs to ended: it starts again with the next one, at once, no attempt counted
        return replace(keep, action=Action.DELETE_DRIVER, phase=WriterPhase.PENDING, reason="Stopped",
                       message="its driver was stopped when `weir run` ended; it starts again when `weir "
                       "run` does (no restart counted)", next_retry_at=None)
    if d.phase in ("Succeeded", "Failed"):
        cause = classify_exit(d.exit_code, d.reason)
        if o.lost_conflict and cause != Cause.SUCCESS:
            cause = Cause.CONFLICT   # stopped from outside: however it ended, it lost a conflict
        found = reported_conflict(d.message) if cause == Cause.CONFLICT and not o.lost_conflict else None
        said = driver_ended(d)
        if found is not None and job_error(d.message) is None:
            said += f": {lost_to(found)}"
        ended = _ended(spec, o, now, cause, d.exit_code, d.started_at, _exit_reason(cause, d), said,
                       delete=False, adopt=adopt)
        return replace(ended, conflict=found) if found is not None else ended
    if d.phase == "Unknown":    # the kubelet stopped reporting: the node is gone or cut off
        return _ended(spec, o, now, Cause.INFRASTRUCTURE, None, d.started_at, "NodeLost",
                      "the driver's node stopped reporting (pod phase Unknown)", delete=True, adopt=adopt)
    if d.phase == "Running" and d.started_at is not None:
        ready_deadline = d.started_at + timedelta(seconds=spec.ready_timeout_seconds)
        if not d.ready and now >= ready_deadline:
            return _ended(spec, o, now, Cause.INFRASTRUCTURE, None, d.started_at, "ReadyTimeout",
                          f"the driver did not become ready within {spec.ready_timeout_seconds:g}s",
                          delete=True, adopt=adopt)
        attempts, waits = o.attempts, []
        stable_at = d.started_at + timedelta(seconds=spec.restart_policy.reset_after_seconds)
        if now >= stable_at:
            attempts = attempts.reset()     # stable this long: the budgets start afresh
        elif attempts != attempts.reset():
            waits.append((stable_at - now).total_seconds())
        if not d.ready:
            waits.append((ready_deadline - now).total_seconds())
        return replace(keep, action=Action.WAIT, phase=WriterPhase.RUNNING, attempts=attempts,
                       reason="Running" if d.ready else "Starting", next_retry_at=None,
                       message=f"driver of submission {o.submission_id} is running",
                       requeue_after=min(waits) if waits else None)
    # Pending (or Running without a start time yet): bounded by the start timeout
    # status.submittedAt, else the pod's creation (a status written by an operator that did not record it)
    deadline = (o.submitted_at or d.created_at or now) + timedelta(seconds=spec.start_timeout_seconds)
    if now >= deadline:
        why = f" (container waiting: {d.waiting_reason})" if d.waiting_reason else ""
        return _ended(spec, o, now, Cause.INFRASTRUCTURE, None, None, "StartTimeout",
                      f"the driver did not start within {spec.start_timeout_seconds:g}s{why}",
                      delete=True, adopt=adopt)
    stuck = d.waiting_reason in STUCK_WAITING_REASONS
    return replace(keep, action=Action.WAIT, phase=WriterPhase.SUBMITTED,
                   reason=d.waiting_reason if stuck and d.waiting_reason else "Starting",
                   message=f"driver of submission {o.submission_id} is {d.phase}"
                           + (f" ({d.waiting_reason})" if d.waiting_reason else ""),
                   requeue_after=(deadline - now).total_seconds())


def job_outcome(message: str | None) -> dict[str, Any] | None:
    """A driver's termination message as the job's JSON outcome line (sparkjobs.entry); None when it
    has none or it is not one."""
    try:
        outcome = json.loads(message) if message else None
    except ValueError:
        return None
    return outcome if isinstance(outcome, dict) else None


ERROR_CHARS = 1000   # of a job's error quoted in status and Events (an Event's message is kept short)


def job_error(message: str | None) -> str | None:
    """The job's own error from a driver's termination message (what it could not do and what to do:
    the column, the count), on one line and cut to ERROR_CHARS; None when the outcome names none."""
    outcome = job_outcome(message)
    error = outcome.get("error") if outcome is not None else None
    if not isinstance(error, str) or not error.strip():
        return None
    text = " ".join(error.split())
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS - 1] + "…"


def driver_ended(d: DriverObservation) -> str:
    """How an attempt's driver ended: its exit code and, from its termination message, the job's error."""
    code = f"exit code {d.exit_code}" if d.exit_code is not None else "no exit code known"
    said = f"the driver ended with {code}" + (f" ({d.reason})" if d.reason else "")
    error = job_error(d.message)
    return f"{said}: {error}" if error else said


def reported_conflict(message: str | None) -> dict[str, Any] | None:
    """The lastConflict entry for a conflict the job found itself (at its commit, or by its own early
    check), from its termination message (the JSON outcome line, sparkjobs.batch_write); None when the
    message is not a conflict outcome."""
    outcome = job_outcome(message)
    if outcome is None or outcome.get("outcome") != "conflict" or not outcome.get("instant"):
        return None
    groups = [f"{g[0]}/{g[1]}" if g[0] else str(g[1]) for g in outcome.get("file_groups") or ()
              if isinstance(g, list) and len(g) == 2]
    entry = {"role": "Lost", "instant": str(outcome["instant"]), "other": outcome.get("other"),
             "decidedBy": outcome.get("aborted_by") or SELF_DETECTED, "fileGroups": groups[:100],
             "bytesWritten": outcome.get("bytes_written")}
    return {k: v for k, v in entry.items() if v not in (None, "")}


def lost_to(conflict: Mapping[str, Any]) -> str:
    """A lost conflict (a lastConflict entry) in words: whose write it lost to, on which file groups."""
    groups = conflict.get("fileGroups") or []
    where = f" on file group {groups[0]}" if len(groups) == 1 else \
        f" on {len(groups)} file groups ({', '.join(groups[:3])}{', ...' if len(groups) > 3 else ''})" \
        if groups else ""
    other = f" to write {conflict['other']}" if conflict.get("other") else ""
    return f"its write {conflict.get('instant')} lost a conflict{other}{where}"


# lastConflict.decidedBy of a conflict the writer's job found itself
SELF_DETECTED = "writer"


def _exit_reason(cause: Cause, d: DriverObservation) -> str:
    if cause == Cause.INFRASTRUCTURE:
        return d.reason if d.reason in INFRA_REASONS else "KilledBySignal" if (d.exit_code or 0) > 128 \
            else "DriverLost"
    return {Cause.SUCCESS: "Completed", Cause.FAILURE: "JobFailed", Cause.BAD_INPUT: "BadInput",
            Cause.CONFLICT: "Conflict", Cause.BUSY: "Busy", Cause.UNAVAILABLE: "SourceUnavailable"}[cause]


def _submit(ref: ObjectRef, spec: LakeWriterSpec, o: WriterObserved, now: datetime, reason: str,
            driver_present: bool, adopt: bool = True) -> WriterPlan:
    """Record a new submission; a driver pod still present (a finished attempt's) goes first, so there is
    never more than one driver."""
    if driver_present:
        return WriterPlan(action=Action.DELETE_DRIVER, phase=o.phase, reason=reason,
                          message="deleting the previous attempt's driver before the next submission",
                          attempts=o.attempts, submission_id=o.submission_id, submitted_at=o.submitted_at,
                          next_retry_at=o.next_retry_at, adopt_spec=adopt)
    attempts = replace(o.attempts, total=o.attempts.total + 1)
    sid = submission_id(ref, attempts.total)
    return WriterPlan(action=Action.SUBMIT, phase=WriterPhase.SUBMITTED, reason=reason,
                      message=f"submitting attempt {attempts.total} as {sid}", attempts=attempts,
                      submission_id=sid, submitted_at=now, next_retry_at=None,
                      requeue_after=spec.start_timeout_seconds, adopt_spec=True)


def _ended(spec: LakeWriterSpec, o: WriterObserved, now: datetime, cause: Cause, exit_code: int | None,
           started_at: datetime | None, reason: str, message: str, *, delete: bool,
           adopt: bool) -> WriterPlan:
    """An attempt ended: record it and apply the restart policy."""
    policy = spec.restart_policy
    attempts = o.attempts
    if started_at is not None and now - started_at >= timedelta(seconds=policy.reset_after_seconds):
        attempts = attempts.reset()          # it ran stably before it ended: a fresh budget
    record = AttemptRecord(attempt=o.attempts.total, submission_id=o.submission_id or "", cause=cause,
                           exit_code=exit_code, started_at=started_at, finished_at=now)
    action = Action.DELETE_DRIVER if delete else Action.NONE
    base = WriterPlan(action=action, phase=WriterPhase.FAILED, reason=reason, message=message,
                      attempts=attempts, submission_id=o.submission_id, submitted_at=o.submitted_at,
                      finished=record, adopt_spec=adopt)

    def retry(attempts: Attempts, restarts: int) -> WriterPlan:
        at = now + timedelta(seconds=backoff_seconds(policy, restarts))
        return replace(base, phase=WriterPhase.BACKING_OFF, attempts=attempts, next_retry_at=at,
                       message=f"{message}; restarting at {at.isoformat()}",
                       requeue_after=(at - now).total_seconds())

    if cause == Cause.SUCCESS:
        if policy.type == "Always":
            return retry(attempts, 0)
        return replace(base, phase=WriterPhase.SUCCEEDED)
    if cause == Cause.BAD_INPUT:
        return replace(base, message=f"{message}; the input or the table's configuration is wrong and "
                       f"retrying does not help: fix it, then {RERUN}")
    if policy.type == "Never":
        if cause == Cause.CONFLICT:
            return replace(base, phase=WriterPhase.ABORTED, message=f"{message}: lost a write conflict "
                           f"(restartPolicy Never); to rerun, {RERUN}")
        return replace(base, message=f"{message} (restartPolicy Never); to rerun, {RERUN}")
    if cause == Cause.CONFLICT:
        if policy.on_conflict == "Abort":
            return replace(base, phase=WriterPhase.ABORTED, message=f"{message}: lost a write conflict "
                           f"(onConflict Abort); to rerun, {RERUN}")
        return retry(replace(attempts, conflicts=attempts.conflicts + 1), attempts.conflicts)
    if cause == Cause.UNAVAILABLE:   # neither the job's fault nor the cluster's: wait, never give up
        waiting = retry(replace(attempts, unavailable=attempts.unavailable + 1), attempts.unavailable)
        return replace(waiting, message=f"{waiting.message} (the source did not answer; no restart budget is "
                       "spent: the writer goes on once it answers)")
    if cause == Cause.INFRASTRUCTURE:
        if attempts.infra_failures >= policy.max_infra_restarts:
            return replace(base, attempts=replace(attempts, infra_failures=attempts.infra_failures + 1),
                           message=f"{message}; maxInfraRestarts ({policy.max_infra_restarts}) spent: fix "
                           f"the cluster problem, then {RERUN}")
        return retry(replace(attempts, infra_failures=attempts.infra_failures + 1), attempts.infra_failures)
    # failure, or busy (a writer is never busy; treated as a failure)
    if attempts.failures >= policy.max_restarts:
        return replace(base, attempts=replace(attempts, failures=attempts.failures + 1),
                       message=f"{message}; maxRestarts ({policy.max_restarts}) spent: read the driver's "
                       f"log, fix the cause, then {RERUN}")
    return retry(replace(attempts, failures=attempts.failures + 1), attempts.failures)
