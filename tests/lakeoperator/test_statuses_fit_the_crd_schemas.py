"""Every status the operator writes fits its CRD's status schema: a field the schema lacks would be
dropped by the API server (as `submittedAt` once was), and a value outside an enum refused. Statuses
come from the real status functions over plans of a writer's whole life, services' runs and tables
created, adopted and refused on disk."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from lakeoperator.dev.crd_schema import validation_errors, version_schema
from lakeoperator.plan.service import ActiveRun, ServiceObserved, plan_service
from lakeoperator.plan.writer import WriterObserved, plan_writer
from lakeoperator.reconcile import reconcile_table
from lakeoperator.specs import SpecError, parse_table_service
from lakeoperator.status import (
    invalid_spec_status,
    paused_status,
    read_writer_status,
    service_status,
    writer_status,
)
from tests.lakeoperator.bodies import table_service
from tests.lakeoperator.plan.writer_cases import NOW, REF, ended, running, writer

ROOT = Path(__file__).resolve().parents[2]


def status_schema(plural: str) -> dict:
    crd = yaml.safe_load((ROOT / "crds" / f"weir.dev_{plural}.yaml").read_text())
    return version_schema(crd)["properties"]["status"]


def stored(value):
    """What the API server keeps of a status written as a merge patch: a null removes its field."""
    if isinstance(value, dict):
        return {k: stored(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [stored(v) for v in value]
    return value


def fits(plural: str, status: dict) -> None:
    errors = validation_errors(status_schema(plural), stored(status))
    assert not errors, f"{plural} status does not fit its CRD: {errors}\n{status}"


WRITER_LIFE = {
    "new": WriterObserved(),
    "running": running(),
    "starting": running(ready=False),
    "failed, backing off": ended(1),
    "bad input": ended(2),
    "conflict": ended(3),
    "killed by the platform": ended(137, "OOMKilled"),
    "succeeded": ended(0),
}


@pytest.mark.parametrize("case", list(WRITER_LIFE))
def test_writer_statuses_fit(case):
    spec = writer()
    old = None
    observed = WRITER_LIFE[case]
    for _ in range(3):  # a few steps of its life, each status read back as the next observation's base
        plan = plan_writer(REF, spec, observed, NOW)
        status = writer_status(REF, plan, old, NOW, driver_pod=plan.submission_id)
        fits("lakewriters", status)
        old, observed = status, read_writer_status(status)
    fits("lakewriters", invalid_spec_status(REF, SpecError("spec.source", "bad; fix it"), old, NOW))
    fits("lakewriters", paused_status(REF, old, NOW))


def test_service_statuses_fit():
    spec = parse_table_service(table_service())
    created = datetime(2026, 11, 23, 0, 0, tzinfo=UTC)
    observed = ServiceObserved(created_at=created)
    old = None
    for step in range(3):
        plan = plan_service(REF, spec, observed, NOW)
        pod = plan.active_run.id if plan.active_run else None
        status = service_status(REF, plan, old, NOW, driver_pod=pod)
        fits("tableservices", status)
        old = status
        if plan.active_run is not None and step == 0:
            observed = ServiceObserved(created_at=created, active_run=ActiveRun(plan.active_run.id, NOW))


def test_table_statuses_fit(tmp_path):
    body = yaml.safe_load((ROOT / "crds" / "examples" / "local" / "table.yaml").read_text())
    body["metadata"] |= {"namespace": "default", "uid": "u", "generation": 1}
    body["spec"]["location"] = str(tmp_path / "t")
    created = reconcile_table(body, NOW)
    fits("laketables", created.status)
    body["status"] = created.status
    fits("laketables", reconcile_table(body, NOW).status)
    body["spec"]["buckets"] = 16
    fits("laketables", reconcile_table(body, NOW).status)  # refused: Failed with the mismatch
    body.pop("status")
    fits("laketables", reconcile_table(body, NOW, rival="orders").status)  # LocationInUse
