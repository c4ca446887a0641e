"""Where each resource of a `weir run` stands, from the status the core derived: a writer whose refused
change stalls it still runs its driver to the end (going, not stalled); a writer waiting for a table that
cannot go on is blocked, one waiting for a table that is being created or retried is going; a stream
without availableNow never holds the run open; a Stalled condition of an older generation does not
count; an active service run is going. The run is over when nothing is going."""

from __future__ import annotations

from typing import Any

from lakeoperator.run_verdict import Standing, closing_error, judge, judge_all, over


def body(kind: str, name: str, *, phase: str | None = None, stalled: str | None = None,
         ready_reason: str = "", generation: int = 1, observed: int = 1, **status: Any) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": "False", "reason": ready_reason, "message": f"{name} waits"}]
    if stalled:
        conditions.append({"type": "Stalled", "status": "True", "reason": stalled,
                           "message": f"{name}: fix it"})
    spec: dict[str, Any] = {"tableRef": {"name": "t"}, "mode": "batch"} if kind != "LakeTable" else {}
    return {"kind": kind, "metadata": {"name": name, "namespace": "default", "generation": generation},
            "spec": spec, "status": {"phase": phase, "conditions": conditions, "observedGeneration": observed,
                                     **status}}


def test_a_refused_change_stalls_a_writer_only_once_its_driver_ended() -> None:
    running = body("LakeWriter", "w", phase="Running", stalled="SpecChangeRefused")
    assert judge(running).standing == Standing.GOING
    ended = body("LakeWriter", "w", phase="Succeeded", stalled="SpecChangeRefused")
    assert judge(ended).standing == Standing.STALLED


def test_a_writer_is_blocked_by_a_table_that_cannot_go_on_and_waits_for_one_that_can() -> None:
    waiting = body("LakeWriter", "w", phase="Pending", ready_reason="TableNotReady")
    stalled = [body("LakeTable", "t", stalled="InvalidSpec"), waiting]
    verdicts = judge_all(stalled)
    assert [v.standing for v in verdicts] == [Standing.STALLED, Standing.BLOCKED] and over(verdicts)
    assert verdicts[1].blocked_by == "LakeTable/t"
    retried = judge_all([body("LakeTable", "t", phase="Failed", ready_reason="ReconcileFailed"), waiting])
    assert [v.standing for v in retried] == [Standing.GOING, Standing.GOING] and not over(retried)


def test_a_stream_without_available_now_does_not_hold_the_run() -> None:
    stream = body("LakeWriter", "s", phase="Running")
    stream["spec"] |= {"mode": "streaming", "trigger": {"intervalSeconds": 5}}
    assert judge(stream).standing == Standing.DONE
    stream["spec"]["trigger"] = {"availableNow": True}
    assert judge(stream).standing == Standing.GOING


def test_a_stalled_condition_of_an_older_generation_does_not_count() -> None:
    assert judge(body("LakeTable", "t", stalled="InvalidSpec", generation=2, observed=1)).standing == \
        Standing.GOING


def test_a_service_goes_while_a_run_is_active() -> None:
    assert judge(body("TableService", "c", activeRun={"id": "r"})).standing == Standing.GOING
    assert judge(body("TableService", "c")).standing == Standing.DONE
    assert judge(body("TableService", "c", stalled="InvalidSpec")).standing == Standing.STALLED


def test_the_closing_error_names_each_resource_with_its_manifest() -> None:
    verdicts = judge_all([body("LakeTable", "t", stalled="InvalidSpec"),
                          body("LakeWriter", "w", phase="Succeeded")])
    assert closing_error(verdicts, {("LakeTable", "default", "t"): "m/t.yaml:3"}) == (
        "1 resource cannot go on until its manifest changes (the others ran to completion):\n"
        "  LakeTable/t (m/t.yaml:3): InvalidSpec: t: fix it")
    assert closing_error(verdicts[1:]) is None
