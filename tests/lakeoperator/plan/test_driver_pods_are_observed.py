"""A pod body as the API returns it becomes the planner's DriverObservation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lakeoperator.plan.writer import SUBMISSION_LABEL, DriverObservation, observe_pod

SID = "orders-ingest-1-abcdef01"
T = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def pod(phase: str, *, reason: str | None = None, state: dict[str, Any] | None = None, ready: bool = False,
        extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    containers = [*(extra or []), {"name": "driver", "ready": ready, "state": state or {}}]
    status: dict[str, Any] = {"phase": phase, "containerStatuses": containers}
    if reason:
        status["reason"] = reason
    return {"metadata": {"name": f"{SID}-driver", "labels": {SUBMISSION_LABEL: SID},
                         "creationTimestamp": "2026-11-23T11:59:00Z"}, "status": status}


CREATED = datetime(2026, 11, 23, 11, 59, tzinfo=UTC)
CASES = [
    (pod("Pending", state={"waiting": {"reason": "ImagePullBackOff"}},
         extra=[{"name": "sidecar", "ready": True,
                 "state": {"running": {"startedAt": "2026-11-23T11:00:00Z"}}}]),
     DriverObservation(SID, "Pending", created_at=CREATED, waiting_reason="ImagePullBackOff")),
    (pod("Running", state={"running": {"startedAt": "2026-11-23T12:00:00Z"}}, ready=True),
     DriverObservation(SID, "Running", created_at=CREATED, started_at=T, ready=True)),
    (pod("Failed", state={"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                         "startedAt": "2026-11-23T12:00:00Z"}}),
     DriverObservation(SID, "Failed", created_at=CREATED, reason="OOMKilled", exit_code=137, started_at=T)),
    (pod("Failed", reason="Evicted"), DriverObservation(SID, "Failed", created_at=CREATED, reason="Evicted")),
    (pod("Succeeded", state={"terminated": {"exitCode": 0, "reason": "Completed"}}),
     DriverObservation(SID, "Succeeded", created_at=CREATED, reason="Completed", exit_code=0)),
    ({"metadata": {}, "status": {}}, DriverObservation(None, "Pending")),
]


@pytest.mark.parametrize(("body", "expected"), CASES)
def test_pod_is_observed(body: dict[str, Any], expected: DriverObservation) -> None:
    assert observe_pod(body) == expected
