"""Which LakeWriter spec changes restart the writer, which apply in place, and which are refused."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lakeoperator.plan.writer import Action, WriterObserved, WriterPhase, classify_change, plan_writer
from tests.lakeoperator.plan.writer_cases import NOW, REF, ended, running, writer

CASES: list[tuple[dict[str, Any], str]] = [
    ({}, "none"),
    ({"tableRef": {"name": "other"}}, "refused"),
    ({"mode": "batch"}, "refused"),
    ({"mode": "batch", "restartNonce": "x"}, "refused"),         # the strongest class wins
    ({"source": {"path": "s3://in/other/"}}, "restart"),
    ({"operation": "insert"}, "restart"),
    ({"spark": {"executor": {"instances": 4}}}, "restart"),
    ({"trigger": {"intervalSeconds": 5}}, "restart"),
    ({"columnGroup": "prices"}, "restart"),
    ({"restartNonce": "2026-11-23"}, "restart"),
    ({"restartPolicy": {"maxRestarts": 9}}, "in_place"),
    ({"startTimeoutSeconds": 60}, "in_place"),
    ({"readyTimeoutSeconds": 60, "restartPolicy": {"type": "Always"}}, "in_place"),
    ({"state": "Suspended"}, "in_place"),
]


@pytest.mark.parametrize(("change", "expected"), CASES)
def test_change_class(change: dict[str, Any], expected: str) -> None:
    assert classify_change(writer(), writer(**change)) == expected


def test_a_refused_change_leaves_the_driver_running_and_says_so() -> None:
    plan = plan_writer(REF, writer(mode="batch"), running(change="refused"), NOW)
    assert plan.action is Action.WAIT and plan.phase is WriterPhase.RUNNING and plan.reason == "Running"
    assert plan.refused_change is not None and "revert" in plan.refused_change and not plan.adopt_spec


def test_a_refused_change_does_not_stall_the_restart_policy_nor_get_adopted() -> None:
    observed = replace(ended(1, "Error"), change="refused")
    plan = plan_writer(REF, writer(tableRef={"name": "other"}), observed, NOW)
    assert plan.phase is WriterPhase.BACKING_OFF and plan.refused_change and not plan.adopt_spec
    resubmit = WriterObserved(phase=WriterPhase.PENDING, change="refused")
    plan = plan_writer(REF, writer(tableRef={"name": "other"}), resubmit, NOW)
    assert plan.action is Action.SUBMIT and not plan.adopt_spec


def test_an_in_place_change_adopts_the_spec_without_touching_the_driver() -> None:
    plan = plan_writer(REF, writer(startTimeoutSeconds=60), running(change="in_place"), NOW)
    assert plan.action is Action.WAIT and plan.adopt_spec
