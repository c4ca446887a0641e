"""TableService scheduling: when the next run is due, one run at a time, history within limits (pure).

Owns: `next_run` (cron in UTC with croniter, or a trigger of N delta commits since this service's last
run), `plan_service` (start a run / wait / finish the active run), a run's outcome (the cause of its end,
from the jobs' exit codes: a `busy` exit, 4, is a skipped run, not a failed one), `trim_history`,
deterministic run ids.

Must not: call Kubernetes, read the clock or the timeline. The handler passes in `now` and the number of
delta commits since this service's last run (read with lakecore's read-side APIs), records the plan's
active run in status BEFORE creating its pod (named after the run id), so a re-run never starts a second.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from croniter import croniter

from lakeoperator.plan.writer import Cause, DriverObservation, classify_exit, job_error, job_outcome
from lakeoperator.specs import ObjectRef, ServiceTriggerSpec, TableServiceSpec

# a trigger is evaluated again this often (commits are not events the operator watches), and a skipped
# run (another run of the service was busy) is not retried sooner than this
TRIGGER_RECHECK_SECONDS = 30.0


class ServiceAction(enum.StrEnum):
    START = "start"     # create the run's pod named after plan.active_run.id (idempotent)
    WAIT = "wait"       # a run is active, or none is due yet: plan again after requeue_after
    NONE = "none"       # suspended, nothing scheduled


@dataclass(frozen=True)
class ActiveRun:
    id: str
    started_at: datetime
    scheduled_at: datetime | None = None   # the cron slot it runs for (None: triggered)
    counted_through: str | None = None     # triggered: no write the trigger counted completed after it


@dataclass(frozen=True)
class RunRecord:
    """A finished run (status.lastRun, status.history[])."""

    id: str
    started_at: datetime
    finished_at: datetime
    outcome: Cause                  # status: success | busy (skipped) | failure | badInput | ...
    exit_code: int | None = None
    scheduled_at: datetime | None = None
    instant: str | None = None
    error: str | None = None        # the job's own error from its termination message, when it failed
    counted_through: str | None = None   # ActiveRun.counted_through: the trigger counts writes after it


@dataclass(frozen=True)
class ServiceObserved:
    created_at: datetime                         # the object's creation: the first cron base
    active_run: ActiveRun | None = None
    run_pod: DriverObservation | None = None     # the active run's pod (submission_id = run id), if seen
    history: tuple[RunRecord, ...] = ()          # newest last
    delta_commits_since_last_run: int = 0
    # the timeline time no write counted in delta_commits_since_last_run completed after (a triggered run
    # started now records it: the next count starts there, on the table's own clock)
    counted_through: str | None = None

    @property
    def last_run(self) -> RunRecord | None:
        return self.history[-1] if self.history else None


@dataclass(frozen=True)
class ServicePlan:
    action: ServiceAction
    reason: str
    message: str
    active_run: ActiveRun | None
    history: tuple[RunRecord, ...]
    next_run_at: datetime | None
    finished: RunRecord | None = None       # the run that just ended (for an Event)
    delete_runs: tuple[str, ...] = ()       # run ids trimmed from history: their pods may go
    requeue_after: float | None = None


def next_run(when: str | ServiceTriggerSpec, last_run: datetime | None, now: datetime, *,
             created_at: datetime | None = None, delta_commits: int = 0) -> datetime | None:
    """When the next run is due. Cron: the first slot after the last run's slot (or after creation), in
    UTC; may lie in the past (due now). Trigger: `now` once enough delta commits arrived, else None."""
    if isinstance(when, ServiceTriggerSpec):
        return now if delta_commits >= when.after_delta_commits else None
    base = last_run or created_at or now
    nxt: datetime = croniter(when, base.astimezone(UTC)).get_next(datetime)
    return nxt


def latest_slot(schedule: str, now: datetime) -> datetime:
    """The most recent cron slot at or before `now` (missed slots collapse into this one run)."""
    prev: datetime = croniter(schedule, (now + timedelta(seconds=1)).astimezone(UTC)).get_prev(datetime)
    return prev


def run_id(ref: ObjectRef, at: datetime) -> str:
    """Deterministic: a cron run is named after its slot, a triggered run after the moment it starts."""
    stamp = at.astimezone(UTC).strftime("%Y%m%d%H%M%S")
    return f"{ref.name[:40].rstrip('-.').lower()}-{stamp}"


def failed(run: RunRecord) -> bool:
    """Success and busy (another run of this service held it: skipped) are not failures."""
    return run.outcome not in (Cause.SUCCESS, Cause.BUSY)


def trim_history(history: tuple[RunRecord, ...], successful_limit: int,
                 failed_limit: int) -> tuple[tuple[RunRecord, ...], tuple[str, ...]]:
    """Keep the newest `failed_limit` failed runs and the newest `successful_limit` others (skipped count
    with the successful); -> (kept, in order; ids dropped)."""
    kept: list[RunRecord] = []
    n_failed = n_ok = 0
    for r in reversed(history):
        if failed(r):
            n_failed += 1
            if n_failed <= failed_limit:
                kept.append(r)
        else:
            n_ok += 1
            if n_ok <= successful_limit:
                kept.append(r)
    kept.reverse()
    dropped = tuple(r.id for r in history if r not in kept)
    return tuple(kept), dropped


def reported_instant(message: str | None) -> str | None:
    """The instant a run completed, from its pod's termination message (the job's JSON outcome line,
    sparkjobs.entry); None when nothing was due or the message says nothing readable."""
    instant = (job_outcome(message) or {}).get("instant")
    return instant if isinstance(instant, str) and instant else None


def plan_service(ref: ObjectRef, spec: TableServiceSpec, observed: ServiceObserved,
                 now: datetime) -> ServicePlan:
    """The next step of one TableService (concurrencyPolicy Forbid: never two runs at once)."""
    o = observed
    history, active = o.history, o.active_run
    finished = None
    if active is not None:
        pod = o.run_pod if o.run_pod is not None and o.run_pod.submission_id == active.id else None
        if pod is None or pod.phase not in ("Succeeded", "Failed"):
            if pod is None:   # status recorded, pod not (yet) created: create it, under the same name
                return ServicePlan(action=ServiceAction.START, reason="Starting",
                                   message=f"creating the pod of run {active.id}", active_run=active,
                                   history=history, next_run_at=None)
            return ServicePlan(action=ServiceAction.WAIT, reason="Running", message=f"run {active.id} is "
                               f"{pod.phase}", active_run=active, history=history, next_run_at=None)
        cause = classify_exit(pod.exit_code, pod.reason)
        finished = RunRecord(id=active.id, started_at=active.started_at, finished_at=now,
                             outcome=cause, exit_code=pod.exit_code,
                             scheduled_at=active.scheduled_at, instant=reported_instant(pod.message),
                             error=None if cause in (Cause.SUCCESS, Cause.BUSY) else job_error(pod.message),
                             counted_through=active.counted_through)
        history, active = (*history, finished), None
    history, dropped = trim_history(history, spec.successful_runs_history_limit,
                                    spec.failed_runs_history_limit)
    last = finished or o.last_run
    done = ServicePlan(action=ServiceAction.NONE, reason="Suspended", message="spec.suspend is true",
                       active_run=None, history=history, next_run_at=None, finished=finished,
                       delete_runs=dropped)
    if spec.suspend:
        return done
    if spec.schedule is not None:
        base = last.scheduled_at or last.started_at if last is not None else None
        due = next_run(spec.schedule, base, now, created_at=o.created_at)
        assert due is not None
        if due > now:
            return replace(done, action=ServiceAction.WAIT, reason="Scheduled", next_run_at=due,
                           message=f"next run at {due.isoformat()}",
                           requeue_after=(due - now).total_seconds())
        slot = latest_slot(spec.schedule, now)
        run = ActiveRun(id=run_id(ref, slot), started_at=now, scheduled_at=slot)
    else:
        assert spec.trigger is not None
        delta = 0 if finished is not None else o.delta_commits_since_last_run  # counted from this run on
        recent = last is not None and last.outcome == Cause.BUSY and \
            now - last.finished_at < timedelta(seconds=TRIGGER_RECHECK_SECONDS)
        if next_run(spec.trigger, None, now, delta_commits=delta) is None or recent:
            return replace(done, action=ServiceAction.WAIT, reason="WaitingForCommits",
                           message=f"{delta} of {spec.trigger.after_delta_commits} delta commits since the "
                           "last run", requeue_after=TRIGGER_RECHECK_SECONDS)
        run = ActiveRun(id=run_id(ref, now), started_at=now, counted_through=o.counted_through)
    return replace(done, action=ServiceAction.START, reason="Starting", active_run=run,
                   message=f"starting run {run.id}")
