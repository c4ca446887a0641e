"""Sample Weir objects in every phase the reconcile core produces, for the GitOps health tests.

Each status is built by the operator itself: the planners (plan/) decide from an observation, and
status.py writes the status, exactly as a pass of the reconcile core does. Beside each object: what a
user expects Flux (kstatus) and Argo CD to say of it.
"""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Literal

from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.plan.service import (
    ActiveRun,
    RunRecord,
    ServiceObserved,
    plan_service,
)
from lakeoperator.plan.table import desired_config, plan_table
from lakeoperator.plan.writer import (
    Cause,
    DriverObservation,
    WriterObserved,
    WriterPhase,
    plan_writer,
)
from lakeoperator.reconcile import reconcile_writer
from lakeoperator.specs import ObjectRef, SpecError, parse_lake_table, parse_table_service
from lakeoperator.status import (
    TableInfo,
    invalid_spec_status,
    paused_status,
    service_status,
    table_status,
    writer_status,
)
from tests.lakeoperator.bodies import lake_table, lake_writer, table_service
from tests.lakeoperator.plan.writer_cases import NOW, REF, SID, ago, ended, running, writer

KStatus = Literal["Current", "InProgress", "Failed", "Terminating"]
Health = Literal["Healthy", "Progressing", "Degraded", "Suspended", "Missing"]
Kind = Literal["LakeTable", "LakeWriter", "TableService"]


@dataclass(frozen=True)
class Sample:
    name: str
    kind: Kind
    body: dict[str, Any]      # apiVersion, kind, metadata (with generation), status
    kstatus: KStatus          # what Flux should conclude
    health: Health            # what Argo CD should show

    def __str__(self) -> str:
        return self.name


def body(kind: Kind, ref: ObjectRef, status: dict[str, Any] | None, *, generation: int | None = None,
         deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": ref.name, "namespace": ref.namespace, "uid": ref.uid,
                            "generation": ref.generation if generation is None else generation}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T12:10:00Z"
    out: dict[str, Any] = {"apiVersion": "weir.dev/v1alpha1", "kind": kind, "metadata": meta}
    if status is not None:
        out["status"] = copy.deepcopy(status)
    return out


def _writer(name: str, observed: WriterObserved, kstatus: KStatus, health: Health,
            **spec: Any) -> Sample:
    plan = plan_writer(REF, writer(**spec), observed, NOW)
    status = writer_status(REF, plan, None, NOW)
    return Sample(f"LakeWriter/{name}", "LakeWriter", body("LakeWriter", REF, status), kstatus, health)


def _held(name: str, old: dict[str, Any] | None, table_phase: str, kstatus: KStatus, health: Health,
          **spec: Any) -> Sample:
    """A writer whose next submission waits for its LakeTable, through the reconcile core itself."""
    body_ = {**lake_writer(**spec), "status": old} if old else lake_writer(**spec)
    table = {**lake_table(), "status": {"phase": table_phase}}
    with tempfile.TemporaryDirectory() as state:     # nothing is launched: the submission waits
        outcome = reconcile_writer(body_, table, LocalLauncher(state), NOW, PodSettings(),
                                   applied=lake_writer()["spec"] if old else None)
    ref = ObjectRef.from_body(body_)
    return Sample(f"LakeWriter/{name}", "LakeWriter", body("LakeWriter", ref, outcome.status), kstatus,
                  health)


def writer_samples() -> list[Sample]:
    abort = {"restartPolicy": {"onConflict": "Abort"}}
    stale_pod = DriverObservation("orders-ingest-0-00000000", "Succeeded", exit_code=0)
    suspended = {"state": "Suspended"}
    samples = [
        _writer("pending", WriterObserved(driver=stale_pod), "InProgress", "Progressing"),
        _writer("submitting", WriterObserved(), "InProgress", "Progressing"),
        _writer("starting", WriterObserved(WriterPhase.SUBMITTED, submission_id=SID, submitted_at=ago(10),
                                           driver=DriverObservation(SID, "Pending")), "InProgress",
                "Progressing"),
        _writer("image-pull-back-off", WriterObserved(
            WriterPhase.SUBMITTED, submission_id=SID, submitted_at=ago(10),
            driver=DriverObservation(SID, "Pending", waiting_reason="ImagePullBackOff")), "InProgress",
            "Progressing"),
        _writer("running-not-ready", running(ready=False), "InProgress", "Progressing"),
        _writer("running", running(), "Current", "Healthy"),
        _writer("backing-off", ended(1), "InProgress", "Progressing"),
        _writer("waiting-for-winner", WriterObserved(WriterPhase.BACKING_OFF, submission_id=SID,
                                                     next_retry_at=ago(1), winner_running=True),
                "InProgress", "Progressing"),
        _writer("succeeded", ended(0), "Current", "Healthy", mode="batch"),
        _writer("failed", ended(2), "Failed", "Degraded"),
        _writer("aborted", ended(3), "Failed", "Degraded", **abort),
        _writer("suspending", running(), "InProgress", "Progressing", **suspended),
        _writer("suspended", WriterObserved(WriterPhase.SUSPENDED), "Current", "Suspended", **suspended),
        _writer("change-refused", running(change="refused"), "Failed", "Degraded"),
    ]
    phases = {s.body["status"]["phase"] for s in samples}
    assert phases == {p.value for p in WriterPhase}, f"a writer phase has no sample: {phases}"
    failed = samples[9].body["status"]
    assert failed["phase"] == "Failed"
    samples += [
        _held("waiting-for-its-table", None, "Pending", "InProgress", "Progressing"),
        # a failed writer rerun (restartNonce) while its table is refused: held back, not stalled
        _held("rerun-waiting-for-its-table", failed, "Failed", "InProgress", "Progressing",
              restartNonce="again"),
    ]
    ok = writer_status(REF, plan_writer(REF, writer(), running(), NOW), None, NOW)
    invalid = invalid_spec_status(REF, SpecError("spec.source", "set path or table"), ok, NOW)
    paused = paused_status(replace(REF, paused=True), ok, NOW)
    return [*samples,
            Sample("LakeWriter/invalid-spec", "LakeWriter", body("LakeWriter", REF, invalid), "Failed",
                   "Degraded"),
            Sample("LakeWriter/paused", "LakeWriter", body("LakeWriter", REF, paused), "Current",
                   "Suspended"),
            Sample("LakeWriter/spec-changed-not-yet-seen", "LakeWriter",
                   body("LakeWriter", REF, ok, generation=REF.generation + 1), "InProgress", "Progressing")]


TABLE = ObjectRef("lake", "orders", "uid-orders", 2)


def table_samples() -> list[Sample]:
    desired = desired_config(parse_lake_table(lake_table()), "orders")
    creating = plan_table(desired, None)
    ready = table_status(TABLE, creating, None, NOW, info=TableInfo(latest_instant="20261123120000000",
                                                                    latest_instant_time=NOW))
    mismatch = replace(desired, table_type="copy_on_write")   # the table at spec.location

    def sample(name: str, status: dict[str, Any], kstatus: KStatus, health: Health, **kw: Any) -> Sample:
        return Sample(f"LakeTable/{name}", "LakeTable", body("LakeTable", TABLE, status, **kw), kstatus,
                      health)

    return [
        sample("creating", table_status(TABLE, creating, None, NOW), "InProgress", "Progressing"),
        sample("ready", ready, "Current", "Healthy"),
        sample("config-mismatch", table_status(TABLE, plan_table(desired, mismatch), None, NOW), "Failed",
               "Degraded"),
        # storage unreachable: retried, so kstatus waits; Argo CD shows the failure now
        sample("storage-error", table_status(TABLE, creating, None, NOW, error="cannot reach the table"),
               "InProgress", "Degraded"),
        sample("deleting", ready, "Terminating", "Progressing", deleting=True),
        sample("invalid-spec", invalid_spec_status(TABLE, SpecError("spec.location", "set it"), None, NOW),
               "Failed", "Degraded"),
        sample("paused", paused_status(replace(TABLE, paused=True), ready, NOW), "Current", "Suspended"),
    ]


SERVICE = ObjectRef("lake", "orders-compact", "uid-orders-compact", 1)


def service_samples() -> list[Sample]:
    cron = parse_table_service(table_service())
    created = NOW - timedelta(hours=1)
    slot = NOW.replace(minute=0)
    run = ActiveRun(id="orders-compact-20261123120000", started_at=NOW, scheduled_at=slot)
    failed = RunRecord("orders-compact-20261123060000", NOW - timedelta(hours=6), NOW - timedelta(hours=5),
                       Cause.FAILURE, 1, NOW - timedelta(hours=6))
    observed = {
        "scheduled": ServiceObserved(created_at=NOW),
        "starting": ServiceObserved(created_at=NOW - timedelta(hours=7)),
        "running": ServiceObserved(created_at=created, active_run=run,
                                   run_pod=DriverObservation(run.id, "Running")),
        "last-run-failed": ServiceObserved(created_at=created, history=(failed,)),
    }
    health: dict[str, Health] = {"scheduled": "Healthy", "starting": "Healthy", "running": "Healthy",
                                 "last-run-failed": "Degraded"}
    samples = []
    for name, o in observed.items():
        status = service_status(SERVICE, plan_service(SERVICE, cron, o, NOW), None, NOW)
        samples.append(Sample(f"TableService/{name}", "TableService", body("TableService", SERVICE, status),
                              "Current", health[name]))
    triggered = parse_table_service(table_service(schedule=None, trigger={"afterDeltaCommits": 5}))
    waiting = service_status(SERVICE, plan_service(SERVICE, triggered, ServiceObserved(created_at=created),
                                                   NOW), None, NOW)
    suspended = parse_table_service(table_service(suspend=True))
    off = service_status(SERVICE, plan_service(SERVICE, suspended, ServiceObserved(created_at=created), NOW),
                         None, NOW)
    invalid = invalid_spec_status(SERVICE, SpecError("spec.schedule", "not cron"), None, NOW)
    return [*samples,
            Sample("TableService/waiting-for-commits", "TableService", body("TableService", SERVICE, waiting),
                   "Current", "Healthy"),
            Sample("TableService/suspended", "TableService", body("TableService", SERVICE, off), "Current",
                   "Suspended"),
            Sample("TableService/invalid-spec", "TableService", body("TableService", SERVICE, invalid),
                   "Failed", "Degraded")]


def all_samples() -> list[Sample]:
    return [*writer_samples(), *table_samples(), *service_samples()]
