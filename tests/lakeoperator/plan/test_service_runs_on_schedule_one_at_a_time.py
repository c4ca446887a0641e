"""TableService: cron (UTC) or delta-commit trigger, one run at a time, busy is skipped, history trimmed."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeoperator.plan.service import (
    ActiveRun,
    RunRecord,
    ServiceAction,
    ServiceObserved,
    failed,
    latest_slot,
    next_run,
    plan_service,
    run_id,
    trim_history,
)
from lakeoperator.plan.writer import Cause, DriverObservation
from lakeoperator.specs import ObjectRef, ServiceTriggerSpec, TableServiceSpec, parse_table_service
from tests.lakeoperator.bodies import table_service

NOW = datetime(2026, 11, 23, 12, 30, tzinfo=UTC)
REF = ObjectRef("lake", "orders-compact", "uid-s", 1)
CREATED = datetime(2026, 11, 23, 5, 0, tzinfo=UTC)


def service(**spec: Any) -> TableServiceSpec:
    body = table_service(**spec)
    if body["spec"].get("schedule") is None:
        body["spec"].pop("schedule", None)
    return parse_table_service(body)


OK, BAD = Cause.SUCCESS, Cause.FAILURE


def run(id: str, outcome: Cause, at: datetime, **kw: Any) -> RunRecord:
    return RunRecord(id=id, started_at=at, finished_at=at + timedelta(minutes=1), outcome=outcome, **kw)


@pytest.mark.parametrize(("schedule", "last", "expected"), [
    ("0 */6 * * *", None, datetime(2026, 11, 23, 6, 0, tzinfo=UTC)),            # from creation
    ("0 */6 * * *", datetime(2026, 11, 23, 12, 0, tzinfo=UTC), datetime(2026, 11, 23, 18, 0, tzinfo=UTC)),
    ("*/15 * * * *", datetime(2026, 11, 23, 12, 15, tzinfo=UTC), datetime(2026, 11, 23, 12, 30, tzinfo=UTC)),
    ("30 2 * * 1", datetime(2026, 11, 23, 12, 0, tzinfo=UTC), datetime(2026, 11, 30, 2, 30, tzinfo=UTC)),
    ("@hourly", datetime(2026, 11, 23, 12, 0, tzinfo=UTC), datetime(2026, 11, 23, 13, 0, tzinfo=UTC)),
    ("@daily", datetime(2026, 11, 23, 0, 0, tzinfo=UTC), datetime(2026, 11, 24, 0, 0, tzinfo=UTC)),
])
def test_next_cron_run_is_utc(schedule: str, last: datetime | None, expected: datetime) -> None:
    assert next_run(schedule, last, NOW, created_at=CREATED) == expected


def test_a_trigger_is_due_after_enough_delta_commits() -> None:
    trigger = ServiceTriggerSpec(after_delta_commits=5)
    assert next_run(trigger, None, NOW, delta_commits=4) is None
    assert next_run(trigger, None, NOW, delta_commits=5) == NOW


def test_missed_slots_collapse_into_one_run_named_after_the_latest() -> None:
    # created at 05:00; 06:00 and 12:00 were missed (operator down): one run, for 12:00
    plan = plan_service(REF, service(), ServiceObserved(created_at=CREATED), NOW)
    assert plan.action is ServiceAction.START
    slot = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    assert plan.active_run == ActiveRun(id="orders-compact-20261123120000", started_at=NOW, scheduled_at=slot)
    assert latest_slot("0 */6 * * *", slot) == slot


def test_not_due_waits_until_the_next_slot() -> None:
    last = run("orders-compact-20261123120000", Cause.SUCCESS, datetime(2026, 11, 23, 12, 0, tzinfo=UTC),
               scheduled_at=datetime(2026, 11, 23, 12, 0, tzinfo=UTC))
    plan = plan_service(REF, service(), ServiceObserved(created_at=CREATED, history=(last,)), NOW)
    assert plan.action is ServiceAction.WAIT and plan.reason == "Scheduled"
    assert plan.next_run_at == datetime(2026, 11, 23, 18, 0, tzinfo=UTC)
    assert plan.requeue_after == 5.5 * 3600


def test_an_active_run_blocks_a_second_one_even_when_a_slot_is_due() -> None:
    active = ActiveRun("orders-compact-20261123060000", started_at=CREATED + timedelta(hours=1))
    pod = DriverObservation(active.id, "Running")
    observed = ServiceObserved(created_at=CREATED, active_run=active, run_pod=pod)
    plan = plan_service(REF, service(), observed, NOW)
    assert (plan.action, plan.active_run, plan.reason) == (ServiceAction.WAIT, active, "Running")


def test_an_active_run_without_its_pod_creates_it_under_the_same_name() -> None:
    active = ActiveRun("orders-compact-20261123120000", started_at=NOW)
    plan = plan_service(REF, service(), ServiceObserved(created_at=CREATED, active_run=active), NOW)
    assert (plan.action, plan.active_run) == (ServiceAction.START, active)


@pytest.mark.parametrize(("exit_code", "outcome", "is_failed"), [
    (0, Cause.SUCCESS, False), (4, Cause.BUSY, False), (1, Cause.FAILURE, True), (2, Cause.BAD_INPUT, True),
    (137, Cause.INFRASTRUCTURE, True)])
def test_a_finished_run_is_recorded_busy_as_skipped(exit_code: int, outcome: Cause, is_failed: bool) -> None:
    slot = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    active = ActiveRun("orders-compact-20261123120000", started_at=slot, scheduled_at=slot)
    pod = DriverObservation(active.id, "Succeeded" if exit_code == 0 else "Failed", exit_code=exit_code)
    observed = ServiceObserved(created_at=CREATED, active_run=active, run_pod=pod)
    plan = plan_service(REF, service(), observed, NOW)
    assert plan.finished == RunRecord(active.id, slot, NOW, outcome, exit_code, slot)
    assert failed(plan.finished) is is_failed
    assert plan.history == (plan.finished,) and plan.active_run is None
    assert plan.next_run_at == datetime(2026, 11, 23, 18, 0, tzinfo=UTC)


def test_a_pod_of_another_run_is_not_taken_for_the_active_one() -> None:
    active = ActiveRun("orders-compact-20261123120000", started_at=NOW)
    other = DriverObservation("orders-compact-20261123060000", "Failed", exit_code=1)
    plan = plan_service(REF, service(), ServiceObserved(created_at=CREATED, active_run=active, run_pod=other),
                        NOW)
    assert plan.action is ServiceAction.START and plan.finished is None


def test_suspend_starts_nothing_but_records_a_finished_run() -> None:
    active = ActiveRun("r1", started_at=CREATED)
    pod = DriverObservation("r1", "Succeeded", exit_code=0)
    plan = plan_service(REF, service(suspend=True),
                        ServiceObserved(created_at=CREATED, active_run=active, run_pod=pod), NOW)
    assert (plan.action, plan.reason, plan.next_run_at) == (ServiceAction.NONE, "Suspended", None)
    assert plan.finished is not None and plan.finished.outcome is Cause.SUCCESS


def test_triggered_runs_count_delta_commits_and_do_not_retry_a_skip_at_once() -> None:
    spec = service(schedule=None, trigger={"afterDeltaCommits": 3})
    few = plan_service(REF, spec, ServiceObserved(created_at=CREATED, delta_commits_since_last_run=2), NOW)
    assert few.action is ServiceAction.WAIT and few.reason == "WaitingForCommits"
    due = plan_service(REF, spec, ServiceObserved(created_at=CREATED, delta_commits_since_last_run=3), NOW)
    assert due.action is ServiceAction.START and due.active_run == ActiveRun(run_id(REF, NOW), NOW)
    skipped = run("r0", Cause.BUSY, NOW - timedelta(minutes=1))
    recent = ServiceObserved(created_at=CREATED, history=(replace(skipped, finished_at=NOW),),
                             delta_commits_since_last_run=9)
    assert plan_service(REF, spec, recent, NOW).action is ServiceAction.WAIT
    assert plan_service(REF, spec, recent, NOW + timedelta(seconds=30)).action is ServiceAction.START


def test_history_keeps_the_newest_per_outcome_within_limits() -> None:
    t = CREATED
    history = tuple(run(f"r{i}", o, t + timedelta(hours=i)) for i, o in enumerate(
        [OK, BAD, OK, Cause.BUSY, BAD, Cause.INFRASTRUCTURE, OK]))
    kept, dropped = trim_history(history, successful_limit=2, failed_limit=1)
    assert [r.id for r in kept] == ["r3", "r5", "r6"] and dropped == ("r0", "r1", "r2", "r4")
    plan = plan_service(REF, service(successfulRunsHistoryLimit=2, failedRunsHistoryLimit=1),
                        ServiceObserved(created_at=CREATED, history=history), NOW)
    assert plan.history == kept and plan.delete_runs == dropped


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list(Cause)), max_size=30), st.integers(0, 5),
       st.integers(0, 5))
def test_trimming_is_bounded_and_keeps_order(outcomes: list[Cause], ok: int, bad: int) -> None:
    history = tuple(run(f"r{i}", o, CREATED + timedelta(minutes=i)) for i, o in enumerate(outcomes))
    kept, dropped = trim_history(history, ok, bad)
    assert sum(failed(r) for r in kept) <= bad
    assert sum(not failed(r) for r in kept) <= ok
    assert list(kept) == [r for r in history if r in kept] and len(kept) + len(dropped) == len(history)
    assert trim_history(kept, ok, bad) == (kept, ())


def test_a_failed_run_tells_the_jobs_own_error_in_status_conditions_and_event() -> None:
    """The job's outcome line (its driver's termination message) names what broke, e.g. a damaged file:
    lastRun.message and the Degraded condition quote it (not 'see its pod's log'; the RunFinished Event
    says the same run_ended line); a run that succeeded records none, and the record survives a round trip
    through status."""
    from lakeoperator.status import read_service_status, run_json, service_conditions

    error = ("DamagedFile: part-0.parquet of instant 20261123115900123 cannot be read (the Parquet footer "
             "is garbled); `weir table check URI` names the remedy")
    message = json.dumps({"outcome": "bad_input", "error": error})
    slot = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    active = ActiveRun("orders-compact-20261123120000", started_at=slot, scheduled_at=slot)
    pod = DriverObservation(active.id, "Failed", exit_code=2, message=message)
    plan = plan_service(REF, service(), ServiceObserved(created_at=CREATED, active_run=active, run_pod=pod),
                        NOW)
    assert plan.finished is not None and plan.finished.error == error
    degraded = next(c for c in service_conditions(REF, plan) if c.type == "Degraded")
    assert degraded.message == f"run {active.id} ended with badInput: {error}"
    assert run_json(plan.finished)["message"] == error
    back = read_service_status({"history": [run_json(plan.finished)]}, CREATED)
    assert back.history[0].error == error

    ok = DriverObservation(active.id, "Succeeded", exit_code=0, message=json.dumps({"outcome": "done"}))
    fine = plan_service(REF, service(), ServiceObserved(created_at=CREATED, active_run=active, run_pod=ok),
                        NOW)
    assert fine.finished is not None and fine.finished.error is None
    assert "message" not in run_json(fine.finished)
