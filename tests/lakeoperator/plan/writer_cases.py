"""Shared values for the writer planner's tests: a writer, a clock, observations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from lakeoperator.plan.writer import DriverObservation, WriterObserved, WriterPhase
from lakeoperator.specs import LakeWriterSpec, ObjectRef, parse_lake_writer
from tests.lakeoperator.bodies import lake_writer

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
REF = ObjectRef(namespace="lake", name="orders-ingest", uid="uid-1", generation=3)
SID = "orders-ingest-1-abcdef01"


def writer(**spec: Any) -> LakeWriterSpec:
    return parse_lake_writer(lake_writer(**spec))


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def running(seconds_ago: float = 30, ready: bool = True, **kw: Any) -> WriterObserved:
    return WriterObserved(phase=WriterPhase.RUNNING, submission_id=SID, submitted_at=ago(seconds_ago + 5),
                          driver=DriverObservation(SID, "Running", started_at=ago(seconds_ago), ready=ready),
                          **kw)


def ended(exit_code: int | None, reason: str | None = None, *, ran_for: float = 30,
          **kw: Any) -> WriterObserved:
    phase = "Succeeded" if exit_code == 0 else "Failed"
    return WriterObserved(phase=WriterPhase.RUNNING, submission_id=SID, submitted_at=ago(ran_for + 5),
                          driver=DriverObservation(SID, phase, reason=reason, exit_code=exit_code,  # type: ignore[arg-type]
                                                   started_at=ago(ran_for)), **kw)
