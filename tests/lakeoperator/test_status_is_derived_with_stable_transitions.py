"""Status is derived from the plan: golden dicts per kind, lastTransitionTime moves only on a flip,
observedGeneration is recorded, no-op patches are skipped, an invalid spec is a condition."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lakeoperator.plan.service import ActiveRun, RunRecord, ServiceAction, ServicePlan
from lakeoperator.plan.table import TableAction, desired_config, plan_table
from lakeoperator.plan.writer import Action, AttemptRecord, Attempts, Cause, WriterPhase, WriterPlan
from lakeoperator.specs import ObjectRef, SpecError, parse_lake_table
from lakeoperator.status import (
    TableInfo,
    invalid_spec_status,
    paused_status,
    service_status,
    status_patch,
    table_status,
    writer_conditions,
    writer_status,
)
from tests.lakeoperator.bodies import lake_table

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)
REF = ObjectRef("lake", "orders-ingest", "uid-1", 3)
SUBMIT = WriterPlan(action=Action.SUBMIT, phase=WriterPhase.SUBMITTED, reason="Submitting",
                    message="submitting attempt 1 as orders-ingest-1-abcdef01", attempts=Attempts(1),
                    submission_id="orders-ingest-1-abcdef01", submitted_at=T0, requeue_after=300)


def cond(type: str, status: str, reason: str, message: str = "", at: datetime = T0,
         generation: int = 3) -> dict[str, Any]:
    return {"type": type, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ"), "observedGeneration": generation}


def test_writer_status_golden() -> None:
    msg = SUBMIT.message
    assert writer_status(REF, SUBMIT, None, T0, driver_pod="orders-ingest-1-abcdef01-driver") == {
        "phase": "Submitted",
        "conditions": [cond("Ready", "False", "Submitting", msg),
                       cond("Progressing", "True", "Submitting", msg),
                       cond("Degraded", "False", "AsExpected"),
                       cond("ReconciliationPaused", "False", "Reconciling"),
                       cond("Reconciling", "True", "Submitting", msg),
                       cond("Stalled", "False", "AsExpected")],
        "observedGeneration": 3,
        "attempts": {"total": 1, "failures": 0, "infraFailures": 0, "conflicts": 0, "unavailable": 0},
        "history": [],
        "submissionId": "orders-ingest-1-abcdef01",
        "submittedAt": "2026-11-23T12:00:00Z",
        "driverPod": "orders-ingest-1-abcdef01-driver",
        "nextRetryAt": None,
    }


def test_transition_times_move_only_when_a_condition_flips() -> None:
    first = writer_status(REF, SUBMIT, None, T0)
    running = replace(SUBMIT, action=Action.WAIT, phase=WriterPhase.RUNNING, reason="Running", message="ok")
    later = writer_status(REF, running, first, T1)
    times = {c["type"]: c["lastTransitionTime"] for c in later["conditions"]}
    assert times == {"Ready": "2026-11-23T12:05:00Z", "Progressing": "2026-11-23T12:05:00Z",
                     "Degraded": "2026-11-23T12:00:00Z", "ReconciliationPaused": "2026-11-23T12:00:00Z",
                     "Reconciling": "2026-11-23T12:05:00Z", "Stalled": "2026-11-23T12:00:00Z"}
    # same statuses, new reason and message: the time stays
    again = writer_status(REF, replace(running, message="still ok"), later, T1 + timedelta(hours=1))
    assert [c["lastTransitionTime"] for c in again["conditions"]] == list(times.values())


def test_an_unchanged_status_is_no_patch_and_a_change_is_a_minimal_one() -> None:
    first = writer_status(REF, SUBMIT, None, T0)
    assert status_patch(first, writer_status(REF, SUBMIT, first, T1)) is None
    assert status_patch(None, first) == {k: v for k, v in first.items() if v is not None}
    newer = writer_status(replace(REF, generation=4), SUBMIT, first, T1)
    patch = status_patch(first, newer)
    assert patch is not None and set(patch) == {"conditions", "observedGeneration"}
    nested = status_patch({"a": {"b": 1, "c": 2}, "d": 1}, {"a": {"b": 1, "c": 3}})
    assert nested == {"a": {"c": 3}, "d": None}


def test_fields_owned_by_others_are_carried_over() -> None:
    old = {"lastCommit": {"instant": "20261123115959000", "records": 10}, "currentInstant": "x"}
    status = writer_status(REF, SUBMIT, old, T0)
    assert status["lastCommit"] == old["lastCommit"] and status["currentInstant"] == "x"
    assert status_patch(old, status) is not None and "lastCommit" not in (status_patch(old, status) or {})


def test_a_finished_attempt_enters_history_once() -> None:
    record = AttemptRecord(1, "orders-ingest-1-abcdef01", Cause.CONFLICT, 3, T0, T1)
    ended = replace(SUBMIT, action=Action.NONE, phase=WriterPhase.BACKING_OFF, reason="Conflict",
                    finished=record, next_retry_at=T1 + timedelta(seconds=10))
    once = writer_status(REF, ended, None, T1)
    assert once["history"] == [{"attempt": 1, "submissionId": "orders-ingest-1-abcdef01", "cause": "conflict",
                                "exitCode": 3, "startedAt": "2026-11-23T12:00:00Z",
                                "finishedAt": "2026-11-23T12:05:00Z"}]
    assert writer_status(REF, ended, once, T1)["history"] == once["history"]
    assert once["nextRetryAt"] == "2026-11-23T12:05:10Z"


def test_a_backoff_read_back_from_status_never_ends_early() -> None:
    # the status holds whole seconds: a retry due at .2 s is recorded as the next second, not the last
    ended = replace(SUBMIT, action=Action.NONE, phase=WriterPhase.BACKING_OFF, reason="KilledBySignal",
                    next_retry_at=T1 + timedelta(seconds=1, milliseconds=200))
    assert writer_status(REF, ended, None, T1)["nextRetryAt"] == "2026-11-23T12:05:02Z"


# phase -> Ready, Progressing, Degraded
@pytest.mark.parametrize(("phase", "reason", "expected"), [
    (WriterPhase.PENDING, "Submitting", ("False", "True", "False")),
    (WriterPhase.SUBMITTED, "ImagePullBackOff", ("False", "True", "False")),
    (WriterPhase.RUNNING, "Starting", ("False", "True", "False")),
    (WriterPhase.RUNNING, "Running", ("True", "False", "False")),
    (WriterPhase.BACKING_OFF, "JobFailed", ("False", "True", "True")),
    (WriterPhase.SUCCEEDED, "Completed", ("True", "False", "False")),
    (WriterPhase.FAILED, "BadInput", ("False", "False", "True")),
    (WriterPhase.ABORTED, "Conflict", ("False", "False", "True")),
    (WriterPhase.SUSPENDED, "Suspended", ("False", "False", "False")),
])
def test_writer_conditions_per_phase(phase: WriterPhase, reason: str, expected: tuple[str, str, str]) -> None:
    conditions = writer_conditions(REF, replace(SUBMIT, phase=phase, reason=reason))
    assert tuple(c.status for c in conditions[:3]) == expected
    degraded = conditions[2]
    assert degraded.reason == (reason if expected[2] == "True" else "AsExpected")


def test_a_refused_change_degrades_a_running_writer_that_stays_ready() -> None:
    plan = replace(SUBMIT, phase=WriterPhase.RUNNING, reason="Running", refused_change="revert it")
    ready, _, degraded, *_ = writer_conditions(REF, plan)
    assert (ready.status, degraded.status, degraded.reason, degraded.message) == (
        "True", "True", "SpecChangeRefused", "revert it")


def test_an_invalid_spec_is_reported_and_the_rest_kept() -> None:
    old = writer_status(REF, replace(SUBMIT, phase=WriterPhase.RUNNING, reason="Running"), None, T0)
    error = SpecError("spec.source", "needs exactly one of path or table; set one")
    status = invalid_spec_status(replace(REF, generation=4), error, old, T1)
    assert status["phase"] == "Running" and status["submissionId"] == old["submissionId"]
    assert status["conditions"][:3] == [
        cond("Ready", "False", "InvalidSpec", str(error), T1, 4),
        cond("Progressing", "False", "InvalidSpec", "", T0, 4),
        cond("Degraded", "True", "InvalidSpec", str(error), T1, 4)]
    assert status["lastError"] == "spec.source: needs exactly one of path or table; set one"
    assert status["observedGeneration"] == 4


def test_pausing_changes_only_the_paused_condition() -> None:
    old = writer_status(REF, SUBMIT, None, T0)
    paused = paused_status(replace(REF, generation=5, paused=True), old, T1)
    patch = status_patch(old, paused)
    assert patch is not None and set(patch) == {"conditions"}
    assert paused["conditions"][3] == cond("ReconciliationPaused", "True", "Paused",
                                           'annotation weir.dev/paused is "true"; remove it to resume '
                                           "reconciliation", T1, 3)
    assert paused["conditions"][:3] == old["conditions"][:3] and paused["observedGeneration"] == 3


def test_table_status_golden() -> None:
    spec = parse_lake_table(lake_table())
    ref = ObjectRef("lake", "orders", "uid-t", 2)
    plan = plan_table(desired_config(spec, "orders"), None)
    creating = table_status(ref, plan, None, T0)
    assert (creating["phase"], creating["conditions"][1]["status"]) == ("Pending", "True")
    info = TableInfo(latest_instant="20261123120000000", latest_instant_time=T1, pending_compactions=1,
                     active_writers=2, latest_action="deltacommit")
    ready = table_status(ref, replace(plan, action=TableAction.ADOPT), creating, T1, info=info)
    assert ready == {
        "phase": "Ready",
        "conditions": [cond("Ready", "True", "TableReady", "", T1, 2),
                       cond("Progressing", "False", "TableReady", "", T1, 2),
                       cond("Degraded", "False", "AsExpected", "", T0, 2),
                       cond("ReconciliationPaused", "False", "Reconciling", "", T0, 2),
                       cond("Reconciling", "False", "AsExpected", "", T1, 2),
                       cond("Stalled", "False", "AsExpected", "", T0, 2)],
        "observedGeneration": 2, "latestInstant": "20261123120000000", "latestAction": "deltacommit",
        "latestInstantTime": "2026-11-23T12:05:00Z", "pendingCompactions": 1, "activeWriters": 2,
        "lastError": None,
    }


def test_a_refused_table_is_failed_and_says_why() -> None:
    desired = desired_config(parse_lake_table(lake_table()), "orders")
    observed = replace(desired, table_type="copy_on_write")   # the table at spec.location
    status = table_status(REF, plan_table(desired, observed), None, T0)
    assert status["phase"] == "Failed" and status["conditions"][2]["reason"] == "ConfigMismatch"
    assert "tableType" in status["lastError"] and status["conditions"][0]["status"] == "False"


def test_service_status_golden() -> None:
    ref = ObjectRef("lake", "orders-compact", "uid-s", 1)
    last = RunRecord("orders-compact-20261123060000", T0 - timedelta(hours=6), T0 - timedelta(hours=5),
                     Cause.FAILURE, 1, T0 - timedelta(hours=6))
    active = ActiveRun("orders-compact-20261123120000", T0, T0)
    plan = ServicePlan(action=ServiceAction.START, reason="Starting", message="starting run x",
                       active_run=active, history=(last,), next_run_at=None)
    assert service_status(ref, plan, None, T0, driver_pod="orders-compact-20261123120000-driver") == {
        "lastRun": {"id": "orders-compact-20261123060000", "startedAt": "2026-11-23T06:00:00Z",
                    "finishedAt": "2026-11-23T07:00:00Z", "outcome": "failure", "instant": None},
        "nextRunAt": None,
        "activeRun": {"id": "orders-compact-20261123120000", "startedAt": "2026-11-23T12:00:00Z",
                      "submissionId": "orders-compact-20261123120000",
                      "driverPod": "orders-compact-20261123120000-driver"},
        "history": [{"id": "orders-compact-20261123060000", "startedAt": "2026-11-23T06:00:00Z",
                     "finishedAt": "2026-11-23T07:00:00Z", "outcome": "failure", "instant": None}],
        "lastError": None,
        "conditions": [cond("Ready", "True", "Starting", "starting run x", T0, 1),
                       cond("Progressing", "True", "Starting", "starting run x", T0, 1),
                       cond("Degraded", "True", "LastRunFailed", "run orders-compact-20261123060000 ended "
                            "with failure; see its pod's log", T0, 1),
                       cond("ReconciliationPaused", "False", "Reconciling", "", T0, 1),
                       cond("Reconciling", "False", "AsExpected", "", T0, 1),
                       cond("Stalled", "False", "AsExpected", "", T0, 1)],
        "observedGeneration": 1,
    }


def test_the_planners_read_back_what_status_wrote() -> None:
    from lakeoperator.plan.service import ServiceObserved
    from lakeoperator.plan.writer import WriterObserved
    from lakeoperator.status import read_service_status, read_writer_status

    plan = replace(SUBMIT, phase=WriterPhase.BACKING_OFF, attempts=Attempts(4, 1, 2, 3),
                   next_retry_at=T1)
    assert read_writer_status(writer_status(REF, plan, None, T0)) == WriterObserved(
        phase=WriterPhase.BACKING_OFF, attempts=Attempts(4, 1, 2, 3), submission_id=SUBMIT.submission_id,
        submitted_at=T0, next_retry_at=T1)
    assert read_writer_status(None) == WriterObserved()
    last = RunRecord("r1", T0, T1, Cause.BUSY)
    splan = ServicePlan(action=ServiceAction.START, reason="Starting", message="",
                        active_run=ActiveRun("r2", T1), history=(last,), next_run_at=None)
    ref = ObjectRef("lake", "s", "u", 1)
    assert read_service_status(service_status(ref, splan, None, T1), T0) == ServiceObserved(
        created_at=T0, active_run=ActiveRun("r2", T1), history=(last,))


@pytest.mark.parametrize("phase", [WriterPhase.ABORTED, WriterPhase.FAILED])
def test_a_writer_that_stays_terminal_keeps_the_reason_it_ended_with(phase: WriterPhase) -> None:
    ended = replace(SUBMIT, action=Action.NONE, phase=phase, reason="Conflict",
                    message="the driver ended with exit code 3: lost a write conflict (onConflict Abort)")
    first = writer_status(REF, ended, None, T1)
    later = T1 + timedelta(seconds=5)
    again = writer_status(REF, replace(ended, reason=phase.value, message=""), first, later)
    ready = next(c for c in again["conditions"] if c["type"] == "Ready")
    assert (ready["reason"], ready["message"]) == ("Conflict", ended.message)
    assert status_patch(first, again) is None   # nothing to write: the pass repeated


# phase, action, reason -> kstatus' Reconciling, Stalled
@pytest.mark.parametrize(("phase", "action", "reason", "expected"), [
    (WriterPhase.SUBMITTED, Action.SUBMIT, "Submitting", ("True", "False")),
    (WriterPhase.RUNNING, Action.WAIT, "Running", ("False", "False")),
    (WriterPhase.BACKING_OFF, Action.WAIT, "BackingOff", ("True", "False")),
    (WriterPhase.SUCCEEDED, Action.NONE, "Completed", ("False", "False")),
    (WriterPhase.FAILED, Action.NONE, "BadInput", ("False", "True")),
    (WriterPhase.FAILED, Action.DELETE_DRIVER, "ReadyTimeout", ("False", "True")),
    (WriterPhase.ABORTED, Action.NONE, "Conflict", ("False", "True")),
    (WriterPhase.FAILED, Action.WAIT, "TableNotReady", ("True", "False")),     # a rerun held back
    (WriterPhase.SUSPENDED, Action.DELETE_DRIVER, "Suspending", ("True", "False")),
    (WriterPhase.SUSPENDED, Action.NONE, "Suspended", ("False", "False")),
])
def test_kstatus_conditions_follow_the_writer_plan(phase: WriterPhase, action: Action, reason: str,
                                                   expected: tuple[str, str]) -> None:
    conditions = {c.type: c for c in writer_conditions(REF, replace(SUBMIT, phase=phase, action=action,
                                                                    reason=reason))}
    assert (conditions["Reconciling"].status, conditions["Stalled"].status) == expected
    true = [c for c in (conditions["Reconciling"], conditions["Stalled"]) if c.status == "True"]
    assert [c.reason for c in true] == ([reason] if "True" in expected else [])
