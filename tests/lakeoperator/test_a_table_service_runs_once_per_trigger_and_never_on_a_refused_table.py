"""A TableService with `trigger: afterDeltaCommits` under the reconcile core (`weir run`'s, the operator's
alike), with its run's `spark-submit` a stand-in that ends at once:

- A write is counted once. Runs' times are kept to the second and commits complete in milliseconds, so a
  commit completed in the second its run started was counted again and started a second, useless run.
  A triggered run now records the timeline time it counted through (`countedThrough`); the next count
  starts there, on the table's own clock.
- A service does not run on a table the operator refused (its files do not match its spec: `Failed`,
  ConfigMismatch). It waits, as a writer does (`TableNotReady`), and runs once the spec is fixed.
- Between runs too, a service is not Ready while its table is not (it showed Ready, waiting for
  commits, beside a Failed table); it is Ready again once the table is.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from lakecore import Table
from lakecore.timeline import to_epoch_ms
from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.local import Runner, StateDir, apply

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64())])
STAND_IN = """\
import json, os, pathlib
pathlib.Path(os.environ["WEIR_TERMINATION_LOG"]).write_text(json.dumps({"outcome": "nothing_to_do"}))
"""


def manifests(lake: Path, buckets: int) -> list[dict[str, Any]]:
    table = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable",
             "metadata": {"namespace": "default", "name": "orders"},
             "spec": {"location": str(lake), "recordKey": ["id"], "orderingField": "ts", "buckets": buckets,
                      "tableType": "merge_on_read",
                      "schema": [{"name": "id", "type": "int64", "nullable": False},
                                 {"name": "ts", "type": "int64"}]}}
    service = {"apiVersion": "weir.dev/v1alpha1", "kind": "TableService",
               "metadata": {"namespace": "default", "name": "orders-compact"},
               "spec": {"tableRef": {"name": "orders"}, "type": "compaction",
                        "trigger": {"afterDeltaCommits": 1}}}
    return [table, service]


def runner(tmp_path: Path, lake: Path, buckets: int, clock: Callable[[], datetime]
           ) -> tuple[Runner, StateDir, LocalLauncher]:
    stand_in = tmp_path / "spark-submit"
    stand_in.write_text(f"#!{sys.executable}\n{STAND_IN}")
    stand_in.chmod(0o755)
    state = StateDir(tmp_path / "state")
    apply(state, manifests(lake, buckets), clock())
    launcher = LocalLauncher(tmp_path / "state" / "pods-state", substitute={"spark-submit": str(stand_in)})
    return Runner(state, launcher, PodSettings(), clock=clock, supervise=False), state, launcher


def service_status(state: StateDir) -> dict[str, Any]:
    (found,) = [r for r in state.all("TableService")]
    return dict(found.body.get("status") or {})


def steps(run: Runner, until: Callable[[], bool], n: int = 200) -> None:
    for _ in range(n):
        run.step()
        if until():
            return
    raise AssertionError("not reached")


def test_a_commit_completed_in_the_second_its_run_started_is_not_counted_again(tmp_path: Path) -> None:
    lake = tmp_path / "lake" / "orders"
    t = Table.create(str(lake), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                     table_type="merge_on_read")
    done = t.upsert(pa.table({"id": [1], "ts": [1]}, schema=SCHEMA)).instant
    completed = datetime.fromtimestamp(to_epoch_ms(str(done.completion_time)) / 1000, UTC)
    # the run starts a moment after the commit, within the same second (the clock stands at the commit,
    # then moves 1 ms a step): the status keeps that second, which began before the commit completed
    ticks = iter(range(10**6))
    run, state, launcher = runner(tmp_path, lake, 1, lambda: completed + timedelta(milliseconds=next(ticks)))
    try:
        steps(run, lambda: bool(service_status(state).get("lastRun")))
        first = service_status(state)
        assert first["lastRun"]["outcome"] == "success", first
        assert first["lastRun"]["countedThrough"] == done.completion_time
        for _ in range(20):   # no write since: no second run
            run.step()
        status = service_status(state)
        assert len(status["history"]) == 1 and not status.get("activeRun"), status
        ready = {c["type"]: c for c in status["conditions"]}["Ready"]
        assert (ready["reason"], ready["message"]) == ("WaitingForCommits", "0 of 1 delta commits since the "
                                                                            "last run"), ready
        # the next write is counted, and runs the service once more
        t.upsert(pa.table({"id": [2], "ts": [1]}, schema=SCHEMA))
        steps(run, lambda: len(service_status(state).get("history") or ()) == 2)
    finally:
        launcher.close()


def test_a_service_waits_while_its_table_is_refused_and_runs_once_it_is_fixed(tmp_path: Path) -> None:
    lake = tmp_path / "lake" / "orders"
    t = Table.create(str(lake), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                     table_type="merge_on_read")
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1]}, schema=SCHEMA))
    run, state, launcher = runner(tmp_path, lake, 8, lambda: datetime.now(UTC))   # the spec says 8 buckets
    try:
        for _ in range(5):
            run.step()
        (table,) = state.all("LakeTable")
        assert table.body["status"]["phase"] == "Failed", table.body["status"]
        status = service_status(state)
        assert not status.get("activeRun") and not status.get("history"), status
        ready = {c["type"]: c for c in status["conditions"]}["Ready"]
        assert (ready["status"], ready["reason"]) == ("False", "TableNotReady"), ready
        # why, in the table's own words (it said "`kubectl describe lt` says why", under `weir run` too)
        assert "waiting for LakeTable orders to be Ready (it is Failed, ConfigMismatch: the table at this " \
               "location has buckets 2, the spec 8" in ready["message"], ready
        assert [p for p in launcher.pods() if "orders-compact" in p["metadata"]["name"]] == []
        assert [i.action for i in Table.open(str(lake)).timeline().completed] == ["deltacommit"]

        apply(state, manifests(lake, 2), datetime.now(UTC))   # the spec fixed: the service runs
        steps(run, lambda: bool(service_status(state).get("lastRun")))
        assert service_status(state)["lastRun"]["outcome"] == "success"
    finally:
        launcher.close()


def test_a_service_between_runs_is_not_ready_while_its_table_is_not(tmp_path: Path) -> None:
    lake = tmp_path / "lake" / "orders"
    t = Table.create(str(lake), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                     table_type="merge_on_read")
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1]}, schema=SCHEMA))
    run, state, launcher = runner(tmp_path, lake, 2, lambda: datetime.now(UTC))

    def ready() -> dict[str, Any]:
        return {c["type"]: c for c in service_status(state)["conditions"]}["Ready"]

    try:
        steps(run, lambda: bool(service_status(state).get("lastRun")) and not service_status(state).get(
            "activeRun"))
        steps(run, lambda: ready()["reason"] == "WaitingForCommits")
        assert ready()["status"] == "True"
        apply(state, manifests(lake, 8), datetime.now(UTC))   # the spec now says 8 buckets: refused
        steps(run, lambda: ready()["reason"] == "TableNotReady", n=20)
        assert ready()["status"] == "False" and "ConfigMismatch" in ready()["message"], ready()
        assert len(service_status(state)["history"]) == 1
        apply(state, manifests(lake, 2), datetime.now(UTC))
        steps(run, lambda: ready()["reason"] == "WaitingForCommits", n=20)
        assert ready()["status"] == "True"
    finally:
        launcher.close()
