"""`weir describe` shows a resource as `kubectl describe` would — identity and phase, a table's columns
(type, nullable, role), conditions (type, status, reason, since, message), a writer's attempts with
their start and end times and causes, its last conflict (loser and winner instants, file groups, who
decided) and the Events (type, reason, age, message) — with no null field, and `--json` keeps the whole
body; `weir get` labels every column and, piped at 80 columns, keeps names and instants whole.

The state is made by the real reconcile loop of `weir run` (lakeoperator.local.Runner) with its local
launcher: the driver pod's `spark-submit` is a stand-in program that ends its first attempt as a job that
lost a conflict does (exit 3 and the job's JSON outcome as its termination message) and its second as a
success, so the writer is restarted once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import Table
from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.local import Runner, StateDir, apply

ROOT = Path(__file__).resolve().parents[2]
LOSER, WINNER = "20261126074417691", "20261126074418836"
STAND_IN = f"""\
import json, os, pathlib, sys
done = pathlib.Path(sys.argv[0]).with_suffix(".ran")
first = not done.exists()
done.touch()
outcome = {{"outcome": "conflict", "instant": "{LOSER}", "other": "{WINNER}",
           "file_groups": [["", "00000001"]], "bytes_written": 4096}} if first else {{"outcome": "committed"}}
pathlib.Path(os.environ["WEIR_TERMINATION_LOG"]).write_text(json.dumps(outcome))
sys.exit(3 if first else 0)
"""


def manifests(lake: Path) -> list[dict[str, Any]]:
    meta = {"namespace": "lake"}
    table = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable", "metadata": {**meta, "name": "orders"},
             "spec": {"location": str(lake), "recordKey": ["id"], "orderingField": "ts", "buckets": 2,
                      "schema": [{"name": "id", "type": "int64", "nullable": False},
                                 {"name": "ts", "type": "int64"}]}}
    writer = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter",
              "metadata": {**meta, "name": "orders-erase"},
              "spec": {"tableRef": {"name": "orders"}, "mode": "batch", "operation": "delete",
                       "source": {"format": "parquet", "path": str(lake.parent / "erasures")},
                       "restartPolicy": {"onConflict": "Restart",
                                         "backoff": {"initialSeconds": 0.5, "maxSeconds": 0.5}}}}
    return [table, writer]


def weir(*args: str, cwd: Path, columns: int = 80) -> str:
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    done = subprocess.run([sys.executable, "-c", "from lakeoperator.cli import app; app()", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def run_writer(tmp_path: Path) -> tuple[Path, str]:
    lake = Path("lake") / "orders"   # relative to tmp_path, the current directory, as in a manifest
    table = Table.create(str(lake), schema=pa.schema([pa.field("id", pa.int64(), nullable=False),
                                                      ("ts", pa.int64())]),
                         record_key="id", ordering_field="ts", buckets=2)
    latest = table.upsert(pa.table({"id": [1, 2], "ts": [1, 1]})).instant.requested_time
    stand_in = tmp_path / "spark-submit"
    stand_in.write_text(f"#!{sys.executable}\n{STAND_IN}")
    stand_in.chmod(0o755)
    state = StateDir(tmp_path / "state")
    apply(state, manifests(lake), datetime.now(UTC))
    launcher = LocalLauncher(tmp_path / "state" / "pods-state", substitute={"spark-submit": str(stand_in)})
    try:
        done = Runner(state, launcher, PodSettings(), supervise=False).run(timeout_s=60)
    finally:
        launcher.close()
    assert done
    return tmp_path / "state", latest


def test_describe_get_and_the_attempts_start_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    state, latest = run_writer(tmp_path)
    body = json.loads(weir("describe", "lw", "orders-erase", "--namespace", "lake", "--state", str(state),
                           "--json", cwd=tmp_path))["resource"]
    history = body["status"]["history"]
    assert [h["cause"] for h in history] == ["conflict", "success"]
    assert all(h["startedAt"] <= h["finishedAt"] for h in history), history   # the launcher keeps it

    text = weir("describe", "lw", "orders-erase", "--namespace", "lake", "--state", str(state), cwd=tmp_path)
    lines = text.splitlines()
    assert "null" not in text and "None" not in text and "…" not in text, text
    assert max(len(line.rstrip()) for line in lines) <= 80, text
    said = {line.split(":", 1)[0]: " ".join(line.split(":", 1)[1].split()) for line in lines
            if ":" in line and not line.startswith(" ")}
    assert said["Name"] == "orders-erase" and said["Kind"] == "LakeWriter" and said["Phase"] == "Succeeded"
    assert "Conditions" in said and "Attempts" in said and "Last conflict" in said and "Events" in said
    ready = next(line.split() for line in lines if line.split()[:1] == ["Ready"])
    assert ready[1:3] == ["True", "Completed"]
    wide = weir("describe", "lw", "orders-erase", "--namespace", "lake", "--state", str(state), cwd=tmp_path,
                columns=120).splitlines()
    for h in history:   # each attempt: number, (submission: wide enough), started, finished, cause, exit code
        row = [str(h["attempt"]), h["startedAt"], h["finishedAt"], h["cause"], "(exit", f"{h['exitCode']})"]
        assert any(line.split() == row for line in lines), (row, text)
        assert any(line.split() == [row[0], h["submissionId"], *row[1:]] for line in wide), (row, wide)
    conflict = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in lines
                if line.startswith("  ") and ":" in line and line.split(":", 1)[0].strip() in
                ("Outcome", "Loser", "Winner", "File groups", "Decided by")}
    assert conflict["Outcome"] == "lost" and conflict["Loser"].startswith(f"write {LOSER} (lake/orders-erase")
    assert conflict["Winner"].startswith(f"write {WINNER}") and conflict["File groups"] == "00000001"
    assert conflict["Decided by"].startswith("writer at ")   # the writer found it at its commit
    events = text.split("Events:")[1]
    assert "TYPE" in events and "REASON" in events and "AGE" in events and "MESSAGE" in events
    assert any(line.split()[:2] == ["Warning", "Conflict"] for line in events.splitlines())
    assert any(line.split()[:2] == ["Normal", "Completed"] for line in events.splitlines())

    table = weir("describe", "lt", "orders", "--namespace", "lake", "--state", str(state), cwd=tmp_path)
    columns = [line.split() for line in table.split("Columns:")[1].split("Conditions:")[0].splitlines()]
    assert [c for c in columns if c] == [["NAME", "TYPE", "NULLABLE", "ROLE"],
                                         ["id", "int64", "no", "record", "key"],
                                         ["ts", "int64", "yes", "ordering", "field"]], table

    listed = weir("get", "--state", str(state), cwd=tmp_path)
    assert "…" not in listed and max(len(line.rstrip()) for line in listed.splitlines()) <= 80, listed
    tables, writers = (block.splitlines() for block in listed.strip().split("\n\n"))
    assert tables[0].split() == ["NAME", "PHASE", "LATEST", "INSTANT", "LOCATION", "AGE"], tables[0]
    assert tables[1].split()[:4] == ["lt/orders", "Ready", latest, "lake/orders"]
    assert writers[0].split()[:6] == ["NAME", "TABLE", "MODE", "PHASE", "ATTEMPTS", "CURRENT"], writers[0]
    assert writers[-1].split()[:5] == ["lw/orders-erase", "orders", "batch", "Succeeded", "2"], writers
    assert json.loads(weir("get", "lw", "--state", str(state), "--json", cwd=tmp_path))[0]["phase"] == \
        "Succeeded"


def test_get_where_nothing_ran_says_how_something_does(tmp_path: Path) -> None:
    said = weir("get", cwd=tmp_path)
    assert said.startswith("no resources in .weir-run (no .weir-run here: `weir run -f DIR` runs"), said
    (tmp_path / "state").mkdir()
    said = weir("get", "lw", "--state", "state", cwd=tmp_path)
    assert said.strip() == "no resources in state of kind LakeWriter", said


def test_a_service_run_by_commits_is_shown_waiting_for_them(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A TableService with spec.trigger (run after N delta commits) was shown `Scheduled`, as if it had a
    cron slot to wait for."""
    from lakeoperator.local import row

    monkeypatch.chdir(tmp_path)
    lake = Path("lake") / "orders"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64())])
    Table.create(str(lake), schema=schema, record_key="id", ordering_field="ts", buckets=2).upsert(
        pa.table({"id": [1], "ts": [1]}))
    service = {"apiVersion": "weir.dev/v1alpha1", "kind": "TableService",
               "metadata": {"namespace": "lake", "name": "orders-compaction"},
               "spec": {"tableRef": {"name": "orders"}, "type": "compaction",
                        "trigger": {"afterDeltaCommits": 5}}}
    state = StateDir(tmp_path / "state")
    apply(state, [manifests(lake)[0], service], datetime.now(UTC))
    launcher = LocalLauncher(tmp_path / "state" / "pods-state")
    try:
        Runner(state, launcher, PodSettings(), supervise=False).run(timeout_s=30)
    finally:
        launcher.close()
    shown = row(next(iter(state.all("TableService"))))
    assert (shown["phase"], shown["detail"]) == ("WaitingForCommits", "runs=0"), shown


def test_a_writer_the_run_stopped_shows_no_current_instant(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream stopped as `weir run` ends, mid-write: `weir get` kept showing its CURRENT INSTANT (the
    supervision scan that clears it runs no more), as if it were still writing."""
    monkeypatch.chdir(tmp_path)
    lake = Path("lake") / "orders"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64())])
    Table.create(str(lake), schema=schema, record_key="id", ordering_field="ts", buckets=2)
    stand_in = tmp_path / "spark-submit"
    stand_in.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(300)\n")
    stand_in.chmod(0o755)
    table, writer = manifests(lake)
    writer["spec"].update(mode="streaming", trigger={"intervalSeconds": 5})
    state = StateDir(tmp_path / "state")
    apply(state, [table, writer], datetime.now(UTC))
    launcher = LocalLauncher(tmp_path / "state" / "pods-state", substitute={"spark-submit": str(stand_in)})
    runner = Runner(state, launcher, PodSettings(), supervise=False)
    try:
        runner.run(until_done=False, timeout_s=3)
        r = state.load("LakeWriter", "lake", "orders-erase")
        assert r is not None and r.body["status"]["phase"] == "Running", r
        r.body["status"]["currentInstant"] = "20261129050000000"   # as the scan records a live write
        state.save(r)
    finally:
        launcher.close()
    runner.settle()
    status = state.load("LakeWriter", "lake", "orders-erase").body["status"]
    assert status["phase"] == "Pending" and "currentInstant" not in status, status
    listed = weir("get", "lw", "--namespace", "lake", "--state", str(tmp_path / "state"), cwd=tmp_path)
    assert "20261129050000000" not in listed, listed
    where = ("--state", str(tmp_path / "state"))
    assert "lw/orders-erase" not in weir("get", *where, "-n", "default", cwd=tmp_path)
    assert "lw/orders-erase" in weir("get", *where, "-n", "lake", cwd=tmp_path)


def test_a_tables_latest_instant_says_its_action(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that failed leaves a rollback as the table's latest completed instant: `weir run`'s
    progress and `weir describe` showed its instant alone, read as the write that landed. The action
    is shown beside it (status.latestAction)."""
    from lakecore.table.writer import WriteJob
    from lakeoperator.local import row

    monkeypatch.chdir(tmp_path)
    lake = Path("lake") / "orders"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64())])
    t = Table.create(str(lake), schema=schema, record_key="id", ordering_field="ts", buckets=2)
    t.upsert(pa.table({"id": [1], "ts": [1]}))
    WriteJob.start(t.storage, t.config, t.lock, "upsert").abort(ValueError("a null key"))
    rollback = Table.open(str(lake)).timeline().last_completed()
    assert rollback is not None and rollback.action == "rollback"
    state = StateDir(tmp_path / "state")
    apply(state, manifests(lake)[:1], datetime.now(UTC))
    launcher = LocalLauncher(tmp_path / "state" / "pods-state")
    try:
        runner = Runner(state, launcher, PodSettings(), supervise=False)
        runner.step()
        r = state.load("LakeTable", "lake", "orders")
        assert r is not None and r.body["status"]["latestAction"] == "rollback", r.body["status"]
        assert row(r)["detail"] == f"{rollback.requested_time} (rollback)"
        described = weir("describe", "lt", "orders", "-n", "lake", "--state", str(tmp_path / "state"),
                         cwd=tmp_path, columns=200)
        assert f"{rollback.requested_time} (rollback, completed " in described, described
        latest = Table.open(str(lake)).upsert(pa.table({"id": [2], "ts": [1]})).instant
        runner.step()
        r = state.load("LakeTable", "lake", "orders")
        assert r is not None, state
        assert row(r)["detail"] == f"{latest.requested_time} (deltacommit)", r.body["status"]
    finally:
        launcher.close()
