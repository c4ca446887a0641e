"""`weir run` runs the manifests written for a cluster on this machine: a writer with no spec.spark (mode
kubernetes, the default) runs Spark in local mode and says so before it starts, instead of failing on a
cluster it cannot reach; a stream without availableNow is told that the run stops it once the rest is
done (`--follow` keeps it); and what the CRD's rules refuse on a cluster (a batch writer with a trigger or
restarted Always) is refused here too, naming the field, instead of writing the input again and again.
Stopped by SIGTERM or SIGHUP, as by Ctrl-C, `weir run --follow` stops its drivers before it ends, and
the writers they ran wait for the next run, which starts them at once (no failure counted)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from lakeoperator.local import run_notes
from lakeoperator.manifests import Manifests
from tests.lakeoperator.local_run import TABLE, killed, weir_popen, weir_process, weir_run
from tests.support.operator import wait_until


def writer(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter", "metadata": {"name": name},
            "spec": {"tableRef": {"name": "people"}, "mode": "batch",
                     "source": {"format": "parquet", "path": "input"}, **spec}}


@pytest.mark.spark
@pytest.mark.slow
def test_a_writer_without_a_spark_block_runs_in_local_mode_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "input").mkdir()
    pq.write_table(pa.table({"id": [1, 2], "name": ["ada", "bo"]}), tmp_path / "input" / "part-0.parquet")
    (tmp_path / "m").mkdir()
    # Never restarted: on a cluster spark.mode it would fail at once, not after minutes of retries
    load = writer("load", restartPolicy={"type": "Never"})
    (tmp_path / "m" / "all.yaml").write_text(TABLE + "---\n" + json.dumps(load) + "\n")
    ran = weir_process(tmp_path, "run", "-f", "m", "--timeout", "300")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "note: LakeWriter/load: spark.mode kubernetes (the default) asks a cluster for executor pods; " \
           "here Spark runs in local mode" in ran.stderr
    assert "LakeWriter/load: Succeeded attempts=1" in ran.stdout
    assert sorted(Table.open(str(tmp_path / "lake" / "people")).read().column("id").to_pylist()) == [1, 2]


def test_the_notes_name_the_resources_that_run_otherwise_than_on_a_cluster() -> None:
    local = {"spark": {"mode": "local"}}
    docs = [writer("cluster"), writer("local", **local), writer("suspended", state="Suspended"),
            writer("invalid", operation="upsurt"),
            writer("stream", mode="streaming", trigger={"intervalSeconds": 5}, **local),
            writer("drain", mode="streaming", trigger={"availableNow": True}, **local),
            {"apiVersion": "weir.dev/v1alpha1", "kind": "TableService", "metadata": {"name": "compact"},
             "spec": {"tableRef": {"name": "people"}, "type": "compaction", "schedule": "@hourly"}},
            {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter",
             "metadata": {"name": "paused", "annotations": {"weir.dev/paused": "true"}},
             "spec": writer("p")["spec"]}]
    manifests = Manifests(tuple(docs))
    notes = run_notes(manifests, follow=False)
    assert len(notes) == 3, notes
    assert notes.pop(0) == "TableService/compact ('@hourly') runs on a schedule: this run ends when the " \
        "rest is done, before the next slot comes unless it is due now; `weir run --follow` keeps going " \
        "until then"
    assert notes[0].startswith("LakeWriter/cluster, TableService/compact: spark.mode kubernetes (the "
                               "default)") and notes[0].endswith("set `spark: {mode: local}` to say so")
    assert notes[1] == "LakeWriter/stream streams until stopped (no spec.trigger.availableNow): this run " \
                       "stops it once the rest is done (at once when nothing else runs); `weir run " \
                       "--follow` keeps streaming until Ctrl-C, `trigger: {availableNow: true}` writes " \
                       "what is there and ends"
    assert run_notes(manifests, follow=True) == notes[:1]


@pytest.mark.parametrize(("spec", "said"), [
    ({"trigger": {"availableNow": True}}, "spec.trigger: is for streaming writers; a batch writer writes its "
                                          "input once: remove trigger or use mode streaming"),
    ({"restartPolicy": {"type": "Always"}}, "spec.restartPolicy.type: Always would write a batch input again "
                                            "after it succeeded: use OnFailure or Never for a batch writer"),
])
def test_a_batch_writer_with_a_streams_settings_is_refused_before_it_runs(
        tmp_path: Path, spec: dict[str, Any], said: str) -> None:
    (tmp_path / "input").mkdir()
    bad = writer("load", spark={"mode": "local"}, **spec)
    code, out, err = weir_run(tmp_path, {"all.yaml": f"{TABLE}---\n{json.dumps(bad)}\n"}, "--timeout", "20")
    assert code == 1, out + err
    assert f"LakeWriter/load: InvalidSpec\n  InvalidSpec: {said}" in out, out
    assert not (tmp_path / ".weir-run" / "pods-state").exists() or \
        not any((tmp_path / ".weir-run" / "pods-state").iterdir()), "no driver was started"


def driver_pids(work: Path) -> list[int]:
    pods = work / ".weir-run" / "pods-state" / "pods"
    found = [json.loads(p.read_text()) for p in pods.glob("*/*.json")] if pods.is_dir() else []
    return [int(b["metadata"]["annotations"]["weir.dev/local-pid"]) for b in found
            if (b.get("metadata", {}).get("annotations") or {}).get("weir.dev/local-pid")]


def writer_state(work: Path, name: str) -> dict[str, Any]:
    path = work / ".weir-run" / "resources" / "LakeWriter" / f"default.{name}.json"
    return dict(json.loads(path.read_text())["body"].get("status") or {}) if path.exists() else {}


def stop_drivers(work: Path) -> list[int]:
    """The drivers of the run in `work` still running, killed (the test's, not left for the next one)."""
    left = [pid for pid in driver_pids(work) if group_alive(pid)]
    for pid in left:
        os.killpg(pid, signal.SIGKILL)
    return left


def written(work: Path) -> int:
    try:
        return Table.open(str(work / "lake" / "people")).read().num_rows
    except Exception:   # not created yet
        return 0


def group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("signums", [(signal.SIGTERM,), (signal.SIGHUP,), (signal.SIGINT, signal.SIGTERM)])
def test_weir_run_follow_stopped_by_a_signal_stops_its_drivers(tmp_path: Path,
                                                               signums: tuple[int, ...]) -> None:
    """A service manager stops `weir run --follow` with SIGTERM (a closed terminal: SIGHUP): its drivers,
    each in a session of its own, are stopped too, not left streaming with nobody to supervise them. A
    second signal while they stop (Ctrl-C, then the service manager's SIGTERM) kills them at once; it
    used to end `weir run` half way (its handlers were gone), leaving the writer's status unsettled."""
    (tmp_path / "input").mkdir()
    pq.write_table(pa.table({"id": [1], "name": ["ada"]}), tmp_path / "input" / "part-0.parquet")
    (tmp_path / "m").mkdir()
    ingest = writer("ingest", mode="streaming", trigger={"intervalSeconds": 1}, spark={"mode": "local"})
    (tmp_path / "m" / "all.yaml").write_text(TABLE + "---\n" + json.dumps(ingest) + "\n")
    run = weir_popen(tmp_path, "run", "-f", "m", "--follow")
    try:
        wait_until(lambda: written(tmp_path) == 1, timeout=240)
        [driver] = driver_pids(tmp_path)
        assert group_alive(driver)
        for i, signum in enumerate(signums):
            if i:
                time.sleep(0.2)   # the driver's JVM takes longer than this to stop
            run.send_signal(signum)
        out, _ = run.communicate(timeout=120)
    finally:
        killed(run)
        left = stop_drivers(tmp_path)
    assert run.returncode == 0, out[-3000:]
    assert left == [], "the driver was left running"
    # stopping it was no failure: the writer waits for the next run (not Running with no driver), budgets
    # untouched, and the next run starts it at once (it used to back off, counting exit 143 a failure)
    status = writer_state(tmp_path, "ingest")
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert status["phase"] == "Pending" and ready["reason"] == "Stopped", status
    assert status["attempts"]["total"] == 1 and status["attempts"]["infraFailures"] == 0, status
    assert status.get("history") in (None, []), status
    if signums != (signal.SIGTERM,):
        return
    again = weir_popen(tmp_path, "run", "-f", "m", "--follow")
    try:
        wait_until(lambda: writer_state(tmp_path, "ingest").get("phase") == "Running", timeout=120)
        again.send_signal(signal.SIGTERM)
        out, _ = again.communicate(timeout=120)
    finally:
        killed(again)
        stop_drivers(tmp_path)
    assert "BackingOff" not in out and "KilledBySignal" not in out, out
    assert writer_state(tmp_path, "ingest")["attempts"]["total"] == 2


def test_a_stream_the_run_ends_before_it_starts_is_pending_not_submitted(tmp_path: Path) -> None:
    """Without --follow a run whose only writer streams ends at once: the writer was left Submitted,
    "creating the driver", with no driver and no run going. (No driver is started.)"""
    (tmp_path / "input").mkdir()
    tail = writer("tail", mode="streaming", trigger={"intervalSeconds": 5}, spark={"mode": "local"})
    code, out, err = weir_run(tmp_path, {"all.yaml": f"{TABLE}---\n{json.dumps(tail)}\n"}, "--timeout", "20")
    assert code == 0, out + err
    assert out.rstrip().endswith("LakeWriter/tail: Pending attempts=1\n  Stopped: `weir run` ended before "
                                 "its driver started; it starts when `weir run` does"), out
    assert writer_state(tmp_path, "tail")["phase"] == "Pending"
    assert driver_pids(tmp_path) == []


def test_a_second_run_on_the_same_state_directory_is_refused(tmp_path: Path) -> None:
    """Two `weir run` on one state directory both drove its resources (a service ran twice, one run's
    status overwrote the other's): the second is refused, naming the first; another --state runs, and
    once the first is gone (even killed -9) the directory is free."""
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "table.yaml").write_text(TABLE)
    first = weir_popen(tmp_path, "run", "-f", "m", "--follow")
    try:
        wait_until(lambda: (tmp_path / ".weir-run" / "resources").is_dir(), timeout=60)
        second = weir_process(tmp_path, "run", "-f", "m", timeout=60)
        assert second.returncode == 1, second.stdout + second.stderr
        assert f"another `weir run` (pid {first.pid}, started " in second.stderr, second.stderr
        assert "uses the state directory .weir-run: stop it first (Ctrl-C), or give this run its own " \
            "--state" in " ".join(second.stderr.split()), second.stderr
        elsewhere = weir_process(tmp_path, "run", "-f", "m", "--state", "other", timeout=120)
        assert elsewhere.returncode == 0, elsewhere.stdout + elsewhere.stderr
    finally:
        killed(first)
        first.communicate()
    again = weir_process(tmp_path, "run", "-f", "m", timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
