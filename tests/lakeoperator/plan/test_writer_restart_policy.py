"""The restart policy: per cause and type, budgets, capped exponential backoff, reset after stable running."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeoperator.plan.writer import Action, Attempts, Cause, WriterPhase, backoff_seconds, plan_writer
from lakeoperator.specs import BackoffSpec, RestartPolicySpec
from tests.lakeoperator.plan.writer_cases import NOW, REF, SID, ended, writer

OOM = (137, "OOMKilled")
# (restartPolicy overrides, attempts before, (exit code, reason), ran for seconds,
#  -> phase, backoff seconds (None: no retry), attempts after)
CASES: list[tuple[str, dict[str, Any], Attempts, tuple[int | None, str | None], float, WriterPhase,
                  float | None, Attempts]] = [
    ("first failure backs off initialSeconds", {}, Attempts(1), (1, "Error"), 30,
     WriterPhase.BACKING_OFF, 10, Attempts(1, failures=1)),
    ("fourth failure backs off initial*factor^3", {}, Attempts(4, failures=3), (1, "Error"), 30,
     WriterPhase.BACKING_OFF, 80, Attempts(4, failures=4)),
    ("backoff is capped at maxSeconds", {"maxRestarts": 20}, Attempts(7, failures=6), (1, "Error"), 30,
     WriterPhase.BACKING_OFF, 300, Attempts(7, failures=7)),
    ("maxRestarts spent: Failed", {}, Attempts(6, failures=5), (1, "Error"), 30,
     WriterPhase.FAILED, None, Attempts(6, failures=6)),
    ("maxRestarts 0: the first failure is final", {"maxRestarts": 0}, Attempts(1), (1, "Error"), 30,
     WriterPhase.FAILED, None, Attempts(1, failures=1)),
    ("bad input is never retried", {}, Attempts(1), (2, "Error"), 30,
     WriterPhase.FAILED, None, Attempts(1)),
    ("bad input is never retried, even with Always", {"type": "Always"}, Attempts(1), (2, "Error"), 30,
     WriterPhase.FAILED, None, Attempts(1)),
    ("conflict with onConflict Restart backs off", {}, Attempts(1), (3, "Error"), 30,
     WriterPhase.BACKING_OFF, 10, Attempts(1, conflicts=1)),
    ("repeated conflicts back off further, with no budget", {}, Attempts(9, conflicts=8), (3, "Error"), 30,
     WriterPhase.BACKING_OFF, 300, Attempts(9, conflicts=9)),
    ("conflict with onConflict Abort", {"onConflict": "Abort"}, Attempts(1), (3, "Error"), 30,
     WriterPhase.ABORTED, None, Attempts(1)),
    ("infrastructure has its own budget", {}, Attempts(6, failures=5), OOM, 30,
     WriterPhase.BACKING_OFF, 10, Attempts(6, failures=5, infra_failures=1)),
    ("infrastructure backs off by its own count", {}, Attempts(3, infra_failures=2), (None, "Evicted"), 30,
     WriterPhase.BACKING_OFF, 40, Attempts(3, infra_failures=3)),
    ("maxInfraRestarts spent: Failed", {}, Attempts(11, infra_failures=10), OOM, 30,
     WriterPhase.FAILED, None, Attempts(11, infra_failures=11)),
    ("killed by a signal is infrastructure", {}, Attempts(1), (143, "Error"), 30,
     WriterPhase.BACKING_OFF, 10, Attempts(1, infra_failures=1)),
    ("success with OnFailure: Succeeded", {}, Attempts(1), (0, "Completed"), 30,
     WriterPhase.SUCCEEDED, None, Attempts(1)),
    ("success with Always: restart after initialSeconds", {"type": "Always"}, Attempts(1), (0, "Completed"),
     30, WriterPhase.BACKING_OFF, 10, Attempts(1)),
    ("Never: a failure is final", {"type": "Never"}, Attempts(1), (1, "Error"), 30,
     WriterPhase.FAILED, None, Attempts(1)),
    ("Never: a conflict aborts", {"type": "Never"}, Attempts(1), (3, "Error"), 30,
     WriterPhase.ABORTED, None, Attempts(1)),
    ("Never: infrastructure is final", {"type": "Never"}, Attempts(1), OOM, 30,
     WriterPhase.FAILED, None, Attempts(1)),
    ("an unavailable source backs off and spends no budget", {"maxRestarts": 0, "maxInfraRestarts": 0},
     Attempts(1), (5, "Error"), 30, WriterPhase.BACKING_OFF, 10, Attempts(1, unavailable=1)),
    ("an unavailable source backs off further each time, never giving up", {}, Attempts(40, unavailable=39),
     (5, "Error"), 30, WriterPhase.BACKING_OFF, 300, Attempts(40, unavailable=40)),
    ("busy is a failure for a writer", {}, Attempts(1), (4, "Error"), 30,
     WriterPhase.BACKING_OFF, 10, Attempts(1, failures=1)),
    ("a run stable for resetAfterSeconds resets the budgets first", {}, Attempts(6, failures=5, conflicts=2),
     (1, "Error"), 601, WriterPhase.BACKING_OFF, 10, Attempts(6, failures=1)),
    ("a shorter run keeps them", {}, Attempts(6, failures=4), (1, "Error"), 599,
     WriterPhase.BACKING_OFF, 160, Attempts(6, failures=5)),
]


@pytest.mark.parametrize(("policy", "before", "exit", "ran_for", "phase", "backoff", "after"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_restart_policy(policy: dict[str, Any], before: Attempts, exit: tuple[int | None, str | None],
                        ran_for: float, phase: WriterPhase, backoff: float | None, after: Attempts) -> None:
    plan = plan_writer(REF, writer(restartPolicy=policy), ended(*exit, ran_for=ran_for, attempts=before), NOW)
    assert plan.phase is phase
    assert plan.attempts == after
    assert plan.next_retry_at == (NOW + timedelta(seconds=backoff) if backoff is not None else None)
    assert plan.requeue_after == backoff
    assert plan.action is Action.NONE          # the finished driver stays (its log) until the next attempt
    assert plan.finished is not None and plan.finished.submission_id == SID
    assert plan.finished.exit_code == exit[0] and plan.finished.finished_at == NOW
    if phase in (WriterPhase.FAILED, WriterPhase.ABORTED):
        assert "restartNonce" in plan.message or "maxRestarts" in plan.message


def test_history_records_the_cause() -> None:
    plan = plan_writer(REF, writer(), ended(137, "OOMKilled", attempts=Attempts(2)), NOW)
    assert plan.finished is not None
    assert (plan.finished.attempt, plan.finished.cause) == (2, Cause.INFRASTRUCTURE)
    assert plan.reason == "OOMKilled"


@pytest.mark.parametrize(("exit_code", "reason", "expected"), [
    (0, None, "Completed"), (1, "Error", "JobFailed"), (2, "Error", "BadInput"), (3, "Error", "Conflict"),
    (137, "OOMKilled", "OOMKilled"), (None, "Evicted", "Evicted"), (143, "Error", "KilledBySignal")])
def test_reasons_name_the_cause(exit_code: int | None, reason: str | None, expected: str) -> None:
    assert plan_writer(REF, writer(), ended(exit_code, reason), NOW).reason == expected


policies = st.builds(
    RestartPolicySpec,
    backoff=st.builds(BackoffSpec, initial_seconds=st.floats(0.1, 100), max_seconds=st.floats(100, 10_000),
                      factor=st.floats(1.0, 10.0)))


@settings(max_examples=200, deadline=None)
@given(policies, st.integers(0, 200))
def test_backoff_is_monotone_and_capped(policy: RestartPolicySpec, n: int) -> None:
    b = policy.backoff
    assert b.initial_seconds <= backoff_seconds(policy, n) <= b.max_seconds
    assert backoff_seconds(policy, n) <= backoff_seconds(policy, n + 1)
    assert backoff_seconds(policy, 0) == b.initial_seconds


# -- a write the supervisor aborted (status.lastConflict names the current submission) ------------


@pytest.mark.parametrize(("exit_code", "reason"), [(1, "Error"), (3, "Error"), (143, None), (None, None)])
def test_an_attempt_stopped_by_the_supervisor_ended_by_a_conflict_however_it_exited(
        exit_code: int | None, reason: str | None) -> None:
    observed = ended(exit_code, reason, lost_conflict=True)
    if exit_code is None:   # its driver was deleted after the grace period
        from dataclasses import replace
        observed = replace(observed, driver=None)
    plan = plan_writer(REF, writer(), observed, NOW)
    assert plan.finished is not None and plan.finished.cause == Cause.CONFLICT
    assert plan.phase == WriterPhase.BACKING_OFF and plan.attempts.conflicts == 1
    aborted = plan_writer(REF, writer(restartPolicy={"onConflict": "Abort"}), observed, NOW)
    assert aborted.phase == WriterPhase.ABORTED and "onConflict Abort" in aborted.message


def test_a_stopped_loser_that_committed_anyway_succeeded() -> None:
    plan = plan_writer(REF, writer(), ended(0, lost_conflict=True), NOW)
    assert plan.phase == WriterPhase.SUCCEEDED


def test_a_backing_off_loser_waits_for_the_winner_then_restarts() -> None:
    from lakeoperator.plan.writer import WriterObserved

    backing_off = WriterObserved(phase=WriterPhase.BACKING_OFF, attempts=Attempts(1, conflicts=1),
                                 submission_id=SID, next_retry_at=NOW - timedelta(seconds=1),
                                 lost_conflict=True, winner_running=True)
    waiting = plan_writer(REF, writer(), backing_off, NOW)
    assert waiting.action == Action.WAIT and waiting.reason == "WaitingForWinner"
    assert waiting.requeue_after and waiting.requeue_after > 0
    from dataclasses import replace
    going = plan_writer(REF, writer(), replace(backing_off, winner_running=False), NOW)
    assert going.action == Action.SUBMIT and going.submission_id != SID
