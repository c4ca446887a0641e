"""`weir run` keeps a LakeTable's status as current as its timeline: once a writer's driver has ended,
the table's `latestInstant` is the write it committed, even when the driver ended in the middle of a
reconcile step (after the step had looked at the table). `latestInstant` is the latest completed instant
by completion time: when a younger write completes before an older one, it is the older one once that
completes, and `latestInstantTime` never goes back, whatever order refreshes come in. The CRD says so."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
import yaml

from lakecore import AfterCommitOptions, Table, WriteJob, WriterOptions
from lakecore.write import conform, route, write_file_group
from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.local import Runner, StateDir, apply, local_settings
from tests.lakecore.concurrency.conflicts.test_occ_conflicts import keys_in_bucket
from tests.lakeoperator.kube.manifests import held_writer, reached, table, write_input
from tests.support.operator import ROOT, pod_environment, wait_until

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.int64()), ("ts", pa.int64())])
ENDED = ("Succeeded", "Failed")


def start_write(location: str, ids: list[int]) -> tuple[WriteJob, list[Any]]:
    """A write with its files written, not committed yet (its heartbeat beats until it commits)."""
    t = Table.open(location)
    quiet = WriterOptions(after_commit=AfterCommitOptions(archival=None))
    job = WriteJob.start(t.storage, t.config, t.lock, "upsert", quiet)
    rows = pa.table({"id": pa.array(ids, pa.int64()), "amount": [1] * len(ids), "ts": [1] * len(ids)},
                    schema=SCHEMA)
    stats = [s for g in route(conform(rows, t.config, "upsert").rows, t.config)
             for s in write_file_group(job.context(), g)]
    return job, stats


def put(state: StateDir, *docs: dict[str, Any]) -> None:
    """`weir run`'s apply of manifests (as read from files: namespace default)."""
    for doc in docs:
        doc["metadata"].setdefault("namespace", "default")
    apply(state, list(docs), datetime.now(UTC))


def newest(location: str) -> tuple[str, str]:
    """The table's latest completed instant by completion time: (requested time, completion time)."""
    last = Table.open(location).timeline().last_completed()
    assert last is not None and last.completion_time
    return last.requested_time, last.completion_time


def table_status(state: StateDir, name: str = "orders") -> dict[str, Any]:
    r = state.load("LakeTable", "default", name)
    assert r is not None
    return dict(r.body.get("status") or {})


def latest_in_order(statuses: list[dict[str, Any]]) -> None:
    """latestInstantTime never goes back from one status to the next (seconds precision: equal is fine)."""
    times = [s["latestInstantTime"] for s in statuses if s.get("latestInstantTime")]
    assert times == sorted(times), statuses


def test_latest_instant_is_the_last_to_complete_and_never_goes_back(tmp_path: Path) -> None:
    location = str(tmp_path / "lake" / "orders")
    state = StateDir(tmp_path / "state")
    runner = Runner(state, LocalLauncher(tmp_path / "pods"), PodSettings())   # no pods: writes from here
    put(state, table(tmp_path, buckets=4))
    runner.step()
    assert table_status(state)["phase"] == "Ready" and table_status(state).get("latestInstant") is None

    older, older_stats = start_write(location, keys_in_bucket(0, 3))      # instant A
    younger, younger_stats = start_write(location, keys_in_bucket(1, 3))  # instant B, requested after A
    assert older.instant.requested_time < younger.instant.requested_time
    seen = []
    younger.commit(younger_stats)           # B completes first ...
    runner.step()
    seen.append(table_status(state))
    assert seen[-1]["latestInstant"] == younger.instant.requested_time == newest(location)[0]
    older.commit(older_stats)               # ... then A: A completed last, so A is the latest
    for _ in range(3):
        runner.step()
        seen.append(table_status(state))
        assert seen[-1]["latestInstant"] == older.instant.requested_time == newest(location)[0]
    latest_in_order(seen)


def test_the_crd_says_latest_instant_is_by_completion_time() -> None:
    crd = yaml.safe_load((ROOT / "crds" / "weir.dev_laketables.yaml").read_text())
    version = crd["spec"]["versions"][0]
    said = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["latestInstant"]
    assert "completion time" in said["description"]
    column = next(c for c in version["additionalPrinterColumns"] if c["jsonPath"] == ".status.latestInstant")
    assert "completion time" in column["description"]


class DriverEndsMidStep(LocalLauncher):
    """The local launcher, where a driver held at its pause point is let go and ends when its writer
    next asks for its pod: after the step's table pass, before the step's writer pass sees it (what a
    run loop meets whenever a driver exits while it is between the two)."""

    hold: Path | None = None

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        if self.hold is not None:
            hold, self.hold = self.hold, None
            hold.unlink()
            wait_until(lambda: self._phase(namespace, name) in ENDED, timeout=180)
        return super().get_pod(namespace, name)

    def _phase(self, namespace: str, name: str) -> str | None:
        return ((super().get_pod(namespace, name) or {}).get("status") or {}).get("phase")


@pytest.mark.spark
@pytest.mark.slow
def test_a_writer_that_ended_mid_step_shows_in_its_tables_status(tmp_path: Path) -> None:
    settings, substitute, env = local_settings()
    env = {**pod_environment(), "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator")])}
    launcher = DriverEndsMidStep(tmp_path / "pods", substitute=substitute, base_env=env, cwd=tmp_path)
    state = StateDir(tmp_path / "state")
    runner = Runner(state, launcher, settings)
    write_input(tmp_path)
    writer, pause = held_writer(SimpleNamespace(work=tmp_path), "orders-load", "orders")
    put(state, table(tmp_path), writer)
    try:
        deadline = time.monotonic() + 240
        while not reached(pause):                  # files and markers written, not committed
            assert time.monotonic() < deadline, f"the driver never reached its pause: {state.all()}"
            runner.step()
            time.sleep(0.5)
        launcher.hold = pause / "hold"
        runner.step()       # the table's pass, then the driver commits and ends, then the writer's pass
        r = state.load("LakeWriter", "default", "orders-load")
        assert r is not None and r.body["status"]["phase"] == "Succeeded", r.body["status"]
        status = table_status(state)
        assert status["latestInstant"] == newest(str(tmp_path / "lake" / "orders"))[0], status
    finally:
        launcher.close()
