"""`weir run --follow` applies a manifest edited, added or removed while it runs, as `kubectl apply`
would: a LakeTable added meanwhile is created; a manifest with a mistake is told and nothing of it
applied, and once fixed it is. (It used to read the manifests once: a fixed manifest, a new
restartNonce, did nothing until the run was started again.) No Spark: tables only."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from tests.lakeoperator.local_run import TABLE, killed, weir_popen
from tests.support.operator import wait_until


def table_state(work: Path, name: str) -> dict[str, object]:
    path = work / ".weir-run" / "resources" / "LakeTable" / f"default.{name}.json"
    return dict(json.loads(path.read_text())["body"].get("status") or {}) if path.exists() else {}


def test_follow_applies_a_manifest_added_while_it_runs_and_tells_a_bad_one(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "people.yaml").write_text(TABLE)
    run = weir_popen(tmp_path, "run", "-f", "m", "--follow")
    try:
        wait_until(lambda: table_state(tmp_path, "people").get("phase") == "Ready", timeout=60)
        (tmp_path / "m" / "broken.yaml").write_text("kind: [\n")   # first: a mistake beside a good one
        (tmp_path / "m" / "pets.yaml").write_text(
            TABLE.replace("name: people", "name: pets").replace("lake/people", "lake/pets"))
        time.sleep(3)   # several steps: each finds the mistake, and applies nothing
        assert table_state(tmp_path, "pets") == {} and not (tmp_path / "lake" / "pets").exists()
        (tmp_path / "m" / "broken.yaml").unlink()
        wait_until(lambda: table_state(tmp_path, "pets").get("phase") == "Ready", timeout=60)
        assert (tmp_path / "lake" / "pets").is_dir()
        run.send_signal(signal.SIGINT)
        out, _ = run.communicate(timeout=60)
    finally:
        killed(run)
    assert run.returncode == 0, out
    assert "the changed manifests are not applied: m/broken.yaml:" in out, out
    assert "applied the changed manifests of m" in out, out
    assert "LakeTable/pets: Ready" in out, out
