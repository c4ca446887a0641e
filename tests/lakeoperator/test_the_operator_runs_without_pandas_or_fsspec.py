"""The operator process never imports pandas (pyarrow.dataset pulls it in) or fsspec: a LakeTable's
reconcile passes (create, adopt), a writer's first pass and a supervisor scan of a table on local paths
read table.json and the timeline, never data, so the ~40 MB of RSS these libraries cost stay out of it
(issue 25's bar: 200 MB for the operator). Checked in a fresh interpreter. A filtered read of data
imports pyarrow.dataset where it needs it (lakecore.formats.parquet, lakecore.read.scan), a table on a
remote store fsspec (lakecore.storage.open)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.operator import ROOT

# the entry point and what run_operator imports, then one pass of each kind the operator reconciles
PASSES = """
import json, sys
from datetime import UTC, datetime
from pathlib import Path

import kopf, prometheus_client, yaml
import lakeoperator.main
from lakeoperator import controller, handlers, kube, leader, metrics
from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.local import StateDir
from lakeoperator.reconcile import reconcile_table, reconcile_writer
from lakeoperator.supervision import StoreSink, Supervisor, watched_table
from tests.lakeoperator.bodies import lake_writer

work, now = Path(sys.argv[1]), datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
table = yaml.safe_load(Path("crds/examples/local/table.yaml").read_text())
table["metadata"] |= {"namespace": "default", "uid": "u1", "generation": 1}
table["spec"]["location"] = str(work / "customers")
table["status"] = reconcile_table(table, now).status
adopted = reconcile_table(table, now).status
writer = lake_writer(tableRef={"name": "customers"}, source={"path": str(work / "in")})
written = reconcile_writer(writer, table, LocalLauncher(work / "pods"), now, PodSettings()).status
supervisor = Supervisor(StoreSink(StateDir(work / "state"), LocalLauncher(work / "pods"), grace_s=60))
supervisor.scan(watched_table("default", table, None))
print(json.dumps({"phases": [table["status"]["phase"], adopted["phase"], written["phase"]],
                  "loaded": sorted(m for m in ("pandas", "pyarrow.dataset", "fsspec") if m in sys.modules)}))
"""


def test_reconcile_and_supervision_passes_import_neither_pandas_nor_fsspec(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    done = subprocess.run([sys.executable, "-c", PASSES, str(tmp_path)], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["phases"] == ["Ready", "Ready", "Submitted"]
    assert out["loaded"] == []

