"""The writer's lifecycle: submit once (id in status first), start/ready timeouts, lost and stale drivers,
backoff, suspend/resume, restartNonce; planning is a pure function of the observation."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeoperator.plan.writer import (
    STOPPED_BY_RUNNER,
    Action,
    Attempts,
    Cause,
    DriverObservation,
    WriterObserved,
    WriterPhase,
    plan_writer,
    submission_id,
)
from lakeoperator.run_verdict import Standing, judge
from lakeoperator.status import writer_status
from tests.lakeoperator.plan.writer_cases import NOW, REF, SID, ago, ended, running, writer

SUBMITTED = WriterObserved(phase=WriterPhase.SUBMITTED, attempts=Attempts(1), submission_id=SID,
                           submitted_at=ago(60))


def pending_driver(waiting: str | None = None) -> DriverObservation:
    return DriverObservation(SID, "Pending", waiting_reason=waiting)


def test_a_new_writer_records_a_deterministic_submission_before_any_pod() -> None:
    plan = plan_writer(REF, writer(), WriterObserved(), NOW)
    assert plan.action is Action.SUBMIT and plan.phase is WriterPhase.SUBMITTED
    assert plan.submission_id == submission_id(REF, 1) and plan.attempts == Attempts(total=1)
    assert plan.submitted_at == NOW and plan.adopt_spec and plan.requeue_after == 300


def test_after_a_restart_between_status_and_pod_the_same_submission_is_created_again() -> None:
    plan = plan_writer(REF, writer(), SUBMITTED, NOW)
    assert plan.action is Action.SUBMIT and plan.submission_id == SID
    assert plan.attempts == Attempts(1)                  # not a new attempt
    assert plan.requeue_after == 240


def test_a_pod_never_created_within_the_start_timeout_is_an_infrastructure_failure() -> None:
    plan = plan_writer(REF, writer(), replace(SUBMITTED, submitted_at=ago(300)), NOW)
    assert plan.phase is WriterPhase.BACKING_OFF and plan.reason == "StartTimeout"
    assert plan.finished is not None and plan.finished.cause is Cause.INFRASTRUCTURE
    assert plan.attempts == Attempts(1, infra_failures=1)


@pytest.mark.parametrize("waiting", ["ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError"])
def test_a_stuck_driver_waits_until_the_start_timeout_with_its_reason(waiting: str) -> None:
    plan = plan_writer(REF, writer(), replace(SUBMITTED, driver=pending_driver(waiting)), NOW)
    assert plan.action is Action.WAIT and plan.phase is WriterPhase.SUBMITTED
    assert plan.reason == waiting and plan.requeue_after == 240


@pytest.mark.parametrize("waiting", ["ImagePullBackOff", None])
def test_a_driver_stuck_past_the_start_timeout_fails_and_is_deleted(waiting: str | None) -> None:
    observed = replace(SUBMITTED, submitted_at=ago(301), driver=pending_driver(waiting))
    plan = plan_writer(REF, writer(), observed, NOW)
    assert plan.action is Action.DELETE_DRIVER and plan.phase is WriterPhase.BACKING_OFF
    assert plan.reason == "StartTimeout" and plan.attempts.infra_failures == 1
    assert (waiting or "did not start") in plan.message


def test_without_a_recorded_submission_time_the_pods_creation_bounds_the_start() -> None:
    driver = replace(pending_driver("ImagePullBackOff"), created_at=ago(301))
    plan = plan_writer(REF, writer(), replace(SUBMITTED, submitted_at=None, driver=driver), NOW)
    assert plan.reason == "StartTimeout"


def test_the_start_timeout_is_the_specs() -> None:
    observed = replace(SUBMITTED, submitted_at=ago(61), driver=pending_driver())
    assert plan_writer(REF, writer(startTimeoutSeconds=60), observed, NOW).reason == "StartTimeout"


def test_a_ready_driver_is_running() -> None:
    plan = plan_writer(REF, writer(), running(), NOW)
    assert (plan.action, plan.phase, plan.reason, plan.requeue_after) == (
        Action.WAIT, WriterPhase.RUNNING, "Running", None)


def test_a_driver_never_ready_within_the_ready_timeout_fails() -> None:
    plan = plan_writer(REF, writer(), running(seconds_ago=600, ready=False), NOW)
    assert plan.action is Action.DELETE_DRIVER and plan.reason == "ReadyTimeout"
    assert plan.phase is WriterPhase.BACKING_OFF and plan.attempts.infra_failures == 1
    starting = plan_writer(REF, writer(), running(seconds_ago=100, ready=False), NOW)
    assert (starting.reason, starting.requeue_after) == ("Starting", 500)


def test_stable_running_resets_the_budgets_and_keeps_the_total() -> None:
    spent = Attempts(total=6, failures=5, infra_failures=2, conflicts=1)
    early = plan_writer(REF, writer(), running(seconds_ago=100, attempts=spent), NOW)
    assert early.attempts == spent and early.requeue_after == 500
    stable = plan_writer(REF, writer(), running(seconds_ago=600, attempts=spent), NOW)
    assert stable.attempts == Attempts(total=6)


@pytest.mark.parametrize(("observed", "reason"), [
    (replace(running(), driver=None), "DriverLost"),
    (replace(running(), driver=DriverObservation(SID, "Unknown", started_at=ago(30))), "NodeLost")])
def test_a_lost_driver_is_an_infrastructure_failure(observed: WriterObserved, reason: str) -> None:
    plan = plan_writer(REF, writer(), observed, NOW)
    assert plan.reason == reason and plan.phase is WriterPhase.BACKING_OFF
    assert plan.finished is not None and plan.finished.cause is Cause.INFRASTRUCTURE


def test_a_driver_of_another_submission_is_deleted() -> None:
    observed = replace(running(), driver=DriverObservation("orders-ingest-0-00000000", "Running"))
    plan = plan_writer(REF, writer(), observed, NOW)
    assert plan.action is Action.DELETE_DRIVER and plan.reason == "StaleDriver"
    assert plan.submission_id == SID


def test_backing_off_waits_then_clears_the_old_driver_then_submits_the_next_attempt() -> None:
    old = DriverObservation(SID, "Failed", exit_code=1)
    backing = WriterObserved(phase=WriterPhase.BACKING_OFF, attempts=Attempts(1, failures=1),
                             submission_id=SID, submitted_at=ago(100),
                             next_retry_at=NOW + timedelta(seconds=7), driver=old)
    wait = plan_writer(REF, writer(), backing, NOW)
    assert (wait.action, wait.requeue_after, wait.phase) == (Action.WAIT, 7, WriterPhase.BACKING_OFF)
    due = replace(backing, next_retry_at=NOW)
    assert plan_writer(REF, writer(), due, NOW).action is Action.DELETE_DRIVER
    plan = plan_writer(REF, writer(), replace(due, driver=None), NOW)
    assert plan.action is Action.SUBMIT and plan.attempts == Attempts(2, failures=1)
    assert plan.submission_id == submission_id(REF, 2) != SID


def test_suspend_deletes_the_driver_and_resume_submits_with_fresh_budgets() -> None:
    suspended = writer(state="Suspended")
    plan = plan_writer(REF, suspended, running(attempts=Attempts(3, failures=2)), NOW)
    assert (plan.action, plan.phase) == (Action.DELETE_DRIVER, WriterPhase.SUSPENDED)
    after = WriterObserved(phase=WriterPhase.SUSPENDED, attempts=Attempts(3, failures=2), submission_id=SID)
    idle = plan_writer(REF, suspended, after, NOW)
    assert (idle.action, idle.phase, idle.reason) == (Action.NONE, WriterPhase.SUSPENDED, "Suspended")
    resumed = plan_writer(REF, writer(), after, NOW)
    assert resumed.action is Action.SUBMIT and resumed.reason == "Resuming"
    assert resumed.attempts == Attempts(4)


def test_a_suspended_backoff_forgets_its_retry_time() -> None:
    backing = WriterObserved(phase=WriterPhase.BACKING_OFF, attempts=Attempts(1, failures=1),
                             submission_id=SID, next_retry_at=NOW + timedelta(seconds=7))
    plan = plan_writer(REF, writer(state="Suspended"), backing, NOW)
    assert plan.phase is WriterPhase.SUSPENDED and plan.next_retry_at is None


def test_a_new_restart_nonce_replaces_a_running_driver() -> None:
    spec = writer(restartNonce="2")
    plan = plan_writer(REF, spec, running(change="restart"), NOW)
    assert (plan.action, plan.reason) == (Action.DELETE_DRIVER, "SpecChanged")
    gone = replace(running(change="restart", attempts=Attempts(2, conflicts=1)), driver=None)
    plan = plan_writer(REF, spec, gone, NOW)
    assert plan.action is Action.SUBMIT and plan.attempts == Attempts(3) and plan.adopt_spec


def test_a_new_restart_nonce_reruns_a_failed_writer_with_fresh_budgets() -> None:
    failed = WriterObserved(phase=WriterPhase.FAILED, attempts=Attempts(6, failures=6), submission_id=SID,
                            change="restart")
    plan = plan_writer(REF, writer(restartNonce="again"), failed, NOW)
    assert plan.action is Action.SUBMIT and plan.attempts == Attempts(7)


def test_a_restart_keeps_the_old_spec_until_the_new_submission() -> None:
    """The finished attempt's pod is deleted first; adopting the spec then would make the next pass see no
    change, and the restart would be lost (the writer stayed Failed)."""
    failed = WriterObserved(phase=WriterPhase.FAILED, attempts=Attempts(1), submission_id=SID,
                            change="restart", driver=DriverObservation(SID, "Failed", exit_code=2))
    plan = plan_writer(REF, writer(restartNonce="fixed"), failed, NOW)
    assert plan.action is Action.DELETE_DRIVER and not plan.adopt_spec
    assert plan.phase is WriterPhase.PENDING    # on its way to a new attempt, not still Failed
    plan = plan_writer(REF, writer(restartNonce="fixed"), replace(failed, driver=None), NOW)
    assert plan.action is Action.SUBMIT and plan.adopt_spec and plan.attempts == Attempts(2)


@pytest.mark.parametrize("phase", [WriterPhase.SUCCEEDED, WriterPhase.FAILED, WriterPhase.ABORTED])
def test_a_finished_writer_stays_finished(phase: WriterPhase) -> None:
    observed = WriterObserved(phase=phase, attempts=Attempts(2), submission_id=SID,
                              driver=DriverObservation(SID, "Succeeded", exit_code=0))
    plan = plan_writer(REF, writer(), observed, NOW)
    assert (plan.action, plan.phase, plan.finished) == (Action.NONE, phase, None)


def test_submission_ids_differ_per_attempt_and_object_and_fit_a_pod_name() -> None:
    long = replace(REF, name="a-very-long-writer-name-" * 4)
    ids = {submission_id(r, n) for r in (REF, replace(REF, uid="uid-2"), long) for n in range(1, 50)}
    assert len(ids) == 3 * 49
    for sid in ids:
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", sid) and len(sid) <= 56


drivers = st.none() | st.builds(
    DriverObservation, submission_id=st.sampled_from([SID, "other-1-00000000", None]),
    phase=st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown"]),
    reason=st.sampled_from([None, "OOMKilled", "Evicted", "Error"]),
    exit_code=st.sampled_from([None, 0, 1, 2, 3, 4, 137]),
    waiting_reason=st.sampled_from([None, "ImagePullBackOff"]),
    started_at=st.sampled_from([None, ago(10), ago(700)]), ready=st.booleans())
observations = st.builds(
    WriterObserved, phase=st.sampled_from(list(WriterPhase)),
    attempts=st.builds(Attempts, st.integers(0, 20), st.integers(0, 12), st.integers(0, 12),
                       st.integers(0, 5)),
    submission_id=st.sampled_from([SID, None]), submitted_at=st.sampled_from([None, ago(10), ago(400)]),
    next_retry_at=st.sampled_from([None, ago(1), NOW + timedelta(seconds=5)]),
    change=st.sampled_from(["none", "in_place", "restart", "refused"]), driver=drivers)
specs = st.sampled_from([writer(), writer(state="Suspended"), writer(restartPolicy={"type": "Always"}),
                         writer(restartPolicy={"type": "Never", "onConflict": "Abort"})])


@settings(max_examples=200, deadline=None)
@given(specs, observations)
def test_planning_is_a_function_of_the_observation(spec: object, observed: WriterObserved) -> None:
    first = plan_writer(REF, spec, observed, NOW)  # type: ignore[arg-type]
    assert plan_writer(REF, spec, observed, NOW) == first  # type: ignore[arg-type]
    # never two drivers: a submission only when no driver pod is there, or the recorded one is re-created
    if first.action is Action.SUBMIT and observed.driver is not None:
        pytest.fail(f"submitted with a driver present: {observed} -> {first}")
    if first.action is Action.SUBMIT and first.submission_id != observed.submission_id:
        assert first.attempts.total == observed.attempts.total + 1
    assert first.requeue_after is None or first.requeue_after >= 0


def test_a_failed_writer_restarted_by_a_spec_change_goes_on_while_its_old_driver_is_deleted() -> None:
    """`weir run` after a manifest fix: the pass that deletes the failed attempt's driver must not leave the
    writer Failed and Stalled, or the run ends at once saying it cannot go on until its manifest changes
    (it already did)."""
    failed = WriterObserved(phase=WriterPhase.FAILED, attempts=Attempts(1, failures=1), submission_id=SID,
                            change="restart", driver=DriverObservation(SID, "Failed", exit_code=2))
    plan = plan_writer(REF, writer(restartNonce="fixed"), failed, NOW)
    old = {"phase": "Failed", "observedGeneration": REF.generation - 1,
           "conditions": [{"type": "Stalled", "status": "True", "reason": "BadInput", "message": "fix it"}]}
    status = writer_status(REF, plan, old, NOW)
    body = {"kind": "LakeWriter", "metadata": {"name": REF.name, "namespace": REF.namespace,
                                               "generation": REF.generation},
            "spec": {"tableRef": {"name": "t"}, "mode": "batch"}, "status": status}
    stalled = {c["type"]: c for c in status["conditions"]}["Stalled"]
    assert stalled["status"] == "False" and judge(body).standing is Standing.GOING


@pytest.mark.parametrize("exit_code", [143, 137])
def test_a_driver_stopped_by_the_end_of_weir_run_starts_again_at_once_counting_nothing(exit_code: int
                                                                                       ) -> None:
    """`weir run` stops its drivers when it ends (Ctrl-C, a stream once the rest is done): that is no
    failure. The writer is Pending (not Running with no driver), its budgets untouched, and the next
    pass submits at once, with no backoff."""
    spent = Attempts(3, failures=1, infra_failures=1)
    stopped = ended(exit_code, STOPPED_BY_RUNNER, attempts=spent)
    plan = plan_writer(REF, writer(mode="streaming"), stopped, NOW)
    assert (plan.action, plan.phase, plan.reason) == (Action.DELETE_DRIVER, WriterPhase.PENDING, "Stopped")
    assert plan.attempts == spent and plan.finished is None and plan.next_retry_at is None
    assert "starts again when `weir run` does (no restart counted)" in plan.message
    after = replace(stopped, phase=WriterPhase.PENDING, driver=None)
    again = plan_writer(REF, writer(mode="streaming"), after, NOW)
    assert again.action is Action.SUBMIT and again.attempts == replace(spent, total=4)
    # killed some other way (no reason of the runner's), it is an infrastructure failure as before
    killed = plan_writer(REF, writer(mode="streaming"), ended(exit_code, attempts=spent), NOW)
    assert killed.phase is WriterPhase.BACKING_OFF and killed.finished is not None
    assert killed.finished.cause is Cause.INFRASTRUCTURE
    # and a driver stopped from outside because its write lost a conflict lost that conflict
    lost = plan_writer(REF, writer(mode="streaming"), ended(exit_code, STOPPED_BY_RUNNER, attempts=spent,
                                                           lost_conflict=True), NOW)
    assert lost.finished is not None and lost.finished.cause is Cause.CONFLICT


def test_a_submission_the_ending_run_cannot_start_is_left_pending_for_the_next() -> None:
    """A run that ends right after it recorded a submission (a stream, once the rest is done) left the
    writer Submitted, "creating the driver", with no driver and no run."""
    recorded = WriterObserved(phase=WriterPhase.SUBMITTED, attempts=Attempts(1), submission_id=SID,
                              submitted_at=ago(1), runner_ending=True)
    plan = plan_writer(REF, writer(mode="streaming"), recorded, NOW)
    assert (plan.action, plan.phase, plan.reason) == (Action.NONE, WriterPhase.PENDING, "Stopped")
    assert plan.attempts == Attempts(1) and plan.submission_id == SID
    assert plan_writer(REF, writer(mode="streaming"), replace(recorded, runner_ending=False), NOW).action \
        is Action.SUBMIT
