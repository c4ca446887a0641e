"""Starting `weir run` again runs again each writer of its manifests that ended Failed or Aborted (Pending,
fresh budgets, its attempt count and history kept, an Event); a writer that succeeded, or one that is not
in the manifests given, is left as it is (neither run nor judged: the run ends 0 naming it in a note);
`--no-retry-failed` leaves the failed one Failed and the run ends at once saying how it would run
again. (Spark runs in the end-to-end test of the failed writers' errors; here no driver is started.)"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from lakeoperator.local import Resource, StateDir, apply, retry_failed_writers
from tests.lakeoperator.local_run import TABLE, weir_run

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
WRITER = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter",
          "spec": {"tableRef": {"name": "people"}, "mode": "batch",
                   "source": {"format": "parquet", "path": "input"}}}
ENDED = {"phase": "Failed", "submissionId": "load-3-0123abcd",
         "attempts": {"total": 3, "failures": 3, "infraFailures": 1, "conflicts": 0, "unavailable": 0},
         "history": [{"attempt": 3, "submissionId": "load-3-0123abcd", "cause": "badInput", "exitCode": 2,
                      "finishedAt": "2026-11-28T11:00:00Z"}],
         "conditions": [{"type": t, "status": v, "reason": "BadInput", "message": "fix it"}
                        for t, v in (("Ready", "False"), ("Stalled", "True"))]}


def writer(name: str) -> dict[str, Any]:
    return {**WRITER, "metadata": {"name": name, "namespace": "default"}}


def ended(state: StateDir, name: str, phase: str) -> None:
    """A writer as an earlier run left it: its manifest applied, its status `phase`."""
    [r] = apply(state, [writer(name)], NOW)
    r.body["status"] = {**ENDED, "phase": phase, "observedGeneration": 1}
    r.applied = dict(r.body["spec"])
    state.save(r)


def test_a_failed_writer_goes_back_to_pending_with_fresh_budgets_and_the_rest_stays(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    for name, phase in (("load", "Failed"), ("lost", "Aborted"), ("done", "Succeeded"), ("other", "Failed")):
        ended(state, name, phase)
    given = [r for r in state.all("LakeWriter") if r.key[2] != "other"]   # "other" is not in this run
    said = retry_failed_writers(state, given, NOW)
    assert said == [f"LakeWriter/{n}: it ended {p} (BadInput) in an earlier run: trying again (weir run was "
                    "started again)" for n, p in (("load", "Failed"), ("lost", "Aborted"))]
    load = state.load("LakeWriter", "default", "load")
    assert isinstance(load, Resource)
    status = load.body["status"]
    assert status["phase"] == "Pending" and status["nextRetryAt"] is None
    assert status["attempts"] == {"total": 3, "failures": 0, "infraFailures": 0, "conflicts": 0,
                                  "unavailable": 0}
    assert status["history"] == ENDED["history"] and status["submissionId"] == "load-3-0123abcd"
    assert [(e["type"], e["reason"]) for e in load.events or ()] == [("Normal", "Retrying")]
    for name, phase in (("done", "Succeeded"), ("other", "Failed")):
        kept = state.load("LakeWriter", "default", name)
        assert kept is not None and kept.body["status"]["phase"] == phase and not kept.events


def test_no_retry_failed_leaves_it_failed_and_says_how_it_would_run_again(tmp_path: Path) -> None:
    (tmp_path / "input").mkdir()
    ended(StateDir(tmp_path / ".weir-run"), "load", "Failed")
    manifests = {"table.yaml": TABLE, "writer.yaml": yaml.safe_dump(writer("load"))}
    code, out, err = weir_run(tmp_path, manifests, "--no-retry-failed", "--timeout", "20")
    assert code == 1, out + err
    assert "trying again" not in out and "  LakeWriter/load (m/writer.yaml:1): BadInput: fix it" in err, err
    assert err.rstrip().endswith("A writer that ended Failed or Aborted runs again when `weir run` is "
                                 "started again (fix its input first), or when its manifest changes."), err
    kept = json.loads((tmp_path / ".weir-run" / "resources" / "LakeWriter" / "default.load.json").read_text())
    assert kept["body"]["status"]["phase"] == "Failed" and kept["body"]["status"]["attempts"]["total"] == 3


def test_a_failed_writer_whose_manifest_is_gone_is_left_as_it_is_and_the_run_ends_0(tmp_path: Path) -> None:
    ended(StateDir(tmp_path / ".weir-run"), "gone", "Failed")
    code, out, err = weir_run(tmp_path, {"table.yaml": TABLE}, "--timeout", "20")
    assert code == 0, out + err   # it used to end 1 on the writer whose manifest was deleted
    assert "note: LakeWriter/gone: kept in .weir-run from an earlier run, in none of these manifests: left " \
           "as it is, not run (`weir get` shows it; removing its file under .weir-run/resources forgets " \
           "one; no data is deleted)" in err, err
    assert "LakeWriter/gone" not in out and "trying again" not in out, out
    kept = json.loads((tmp_path / ".weir-run" / "resources" / "LakeWriter" / "default.gone.json").read_text())
    assert kept["body"]["status"]["phase"] == "Failed" and kept["body"]["status"]["attempts"]["total"] == 3
    code, out, err = weir_run(tmp_path, {"table.yaml": TABLE}, "--timeout", "20", "--json")
    said = json.loads(out)
    assert code == 0 and said["done"] and said["waiting"] == [], out + err
    assert [(r["kind"], r["name"]) for r in said["resources"]] == [("LakeTable", "people")], said
    assert said["left_alone"] == [{"kind": "LakeWriter", "namespace": "default", "name": "gone"}], said


def test_a_batch_writer_that_succeeded_before_is_said_not_to_run_again(tmp_path: Path) -> None:
    """New files in a finished batch writer's path are not written by starting `weir run` again: it says
    so, and how they are (it used to end 0 in silence)."""
    (tmp_path / "input").mkdir()
    ended(StateDir(tmp_path / ".weir-run"), "load", "Succeeded")
    code, out, err = weir_run(tmp_path, {"table.yaml": TABLE, "writer.yaml": yaml.safe_dump(writer("load"))},
                              "--timeout", "20")
    assert code == 0, out + err
    assert "note: LakeWriter load succeeded in an earlier run: a batch writer (or a stream with " \
           "availableNow) writes its input once, so it is not run again (new files in its path included); " \
           "a new spec.restartNonce writes it again (a stream: only the files it has not read)" in err
