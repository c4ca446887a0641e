"""`weir run` gave no end to a table whose reconcile kept failing (its ZooKeeper does not answer, its
storage refuses): it retried it, said why under its progress line, and waited for ever (without
--timeout). It now gives such a table --give-up-after seconds (300 by default; retried meanwhile, so a
ZooKeeper that comes up in time is fine), then ends non-zero naming it, its reason and message, and that
it may recover; counted from the run's start at the earliest, so a table that was failing in an earlier
run gets the whole time again. --follow never gives up. No Spark runs here."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lakeoperator.run_verdict import Standing, closing_error, judge
from tests.lakeoperator.local_run import TABLE, weir_run


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])   # closed when the socket is: nothing listens there


def test_a_table_whose_zookeeper_never_answers_ends_the_run_after_give_up_after(tmp_path: Path) -> None:
    port = closed_port()
    table = TABLE + f"  lock: {{provider: zookeeper, zookeeper: {{connect: '127.0.0.1:{port}'}}}}\n"
    code, out, err = weir_run(tmp_path, {"table.yaml": table}, "--give-up-after", "2", "--timeout", "60")
    assert code == 1, out + err
    assert "not done after" not in err, err   # it ended by giving up, not by the timeout
    lines = [line for line in err.splitlines() if not line.startswith("note: ")]
    assert lines[0] == "error: 1 resource cannot go on:", err
    assert lines[1].startswith("  LakeTable/people (m/table.yaml:1): ") and \
        "(still failing, retried; the run gave up on it)" in lines[1], err
    assert f"127.0.0.1:{port}" in lines[1], err   # what does not answer
    assert "--give-up-after SECONDS" in err


def failed_table(since: datetime, degraded_since: datetime | None = None) -> dict:
    stamp = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    earlier = (degraded_since or since).strftime("%Y-%m-%dT%H:%M:%S")   # no zone: taken as UTC
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable",
            "metadata": {"namespace": "default", "name": "t", "generation": 1},
            "status": {"phase": "Failed", "observedGeneration": 1, "conditions": [
                {"type": "Ready", "status": "False", "reason": "ReconcileFailed", "message": "m",
                 "lastTransitionTime": stamp},
                {"type": "Degraded", "status": "True", "reason": "ReconcileFailed", "message": "no answer",
                 "lastTransitionTime": earlier},
                {"type": "Reconciling", "status": "True", "reason": "ReconcileFailed", "message": "m",
                 "lastTransitionTime": stamp}]}}


def test_a_failing_table_is_given_the_time_from_the_later_of_its_failure_and_the_runs_start() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    old = failed_table(now - timedelta(days=2))
    assert judge(old, now=now, give_up_s=300, started=now - timedelta(seconds=10)).standing == Standing.GOING
    gave_up = judge(old, now=now, give_up_s=300, started=now - timedelta(seconds=301))
    assert gave_up.standing == Standing.FAILING and gave_up.message == "no answer"
    fresh = failed_table(now - timedelta(seconds=100))
    assert judge(fresh, now=now, give_up_s=300, started=now - timedelta(days=1)).standing == Standing.GOING
    assert judge(fresh, now=now, give_up_s=60, started=now - timedelta(days=1)).standing == Standing.FAILING
    assert judge(old, now=now).standing == Standing.GOING              # never, unless asked (--follow)
    # Degraded since long before (a lost completed file: Ready then), not ready only since 100 s: going
    lost_then_failing = failed_table(now - timedelta(seconds=100), degraded_since=now - timedelta(days=3))
    assert judge(lost_then_failing, now=now, give_up_s=300, started=now - timedelta(days=1)).standing == \
        Standing.GOING
    said = closing_error([gave_up])
    assert said is not None and said.startswith("1 resource cannot go on:\n  LakeTable/t: ReconcileFailed "
                                                "(still failing, retried; the run gave up on it): no answer")
