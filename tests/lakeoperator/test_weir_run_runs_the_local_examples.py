"""`weir run -f crds/examples/local/` on this machine: the LakeTable is created, both writers' Spark jobs
run as local processes (spark-submit, local[1]) and fill their column groups of one wide table, the
compaction service runs once two delta commits are there (its lastRun names its instant, from the
job's termination message), and `weir get` / `weir describe` show what happened. The table then
equals the join of the two inputs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def weir(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    return subprocess.run([sys.executable, "-c", "from lakeoperator.cli import app; app()", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)


def inputs(work: Path) -> dict[str, dict]:
    (work / "input" / "profile").mkdir(parents=True)
    (work / "input" / "activity").mkdir(parents=True)
    ids = [f"c{i:03d}" for i in range(20)]
    pq.write_table(pa.table({"customer_id": ids, "name": [f"n{i}" for i in range(20)],
                             "email": [f"e{i}@x" for i in range(20)], "profile_ts": [1] * 20}),
                   work / "input" / "profile" / "part-0.parquet")
    with open(work / "input" / "activity" / "part-0.json", "w") as f:
        for i in range(0, 20, 2):
            f.write(json.dumps({"customer_id": ids[i], "orders": i, "total_spent": i * 1.5, "activity_ts": 1})
                    + "\n")
    return {cid: {"customer_id": cid, "name": f"n{i}", "email": f"e{i}@x", "profile_ts": 1,
                  "orders": i if i % 2 == 0 else None, "total_spent": i * 1.5 if i % 2 == 0 else None,
                  "activity_ts": 1 if i % 2 == 0 else None} for i, cid in enumerate(ids)}


def test_the_local_examples_run_end_to_end(tmp_path):
    shutil.copytree(ROOT / "crds" / "examples" / "local", tmp_path / "manifests")
    expected = inputs(tmp_path)
    ran = weir("run", "-f", "manifests", "--timeout", "540", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    got = {r["customer_id"]: r for r in Table.open(str(tmp_path / "lake" / "customers")).read().to_pylist()}
    assert got == expected
    listed = json.loads(weir("get", "--json", cwd=tmp_path).stdout)
    phases = {r["name"]: r["phase"] for r in listed}
    assert phases["customers-profile"] == "Succeeded" and phases["customers-activity"] == "Succeeded", listed
    assert phases["customers"] == "Ready"
    assert {r["name"]: r["detail"] for r in listed}["customers-compaction"] == "success", listed
    timeline = Table.open(str(tmp_path / "lake" / "customers")).timeline()
    assert [i.action for i in timeline.completed].count("compaction") == 1
    compaction = next(i for i in timeline.completed if i.action == "compaction")
    service = json.loads(weir("describe", "lts", "customers-compaction", "--json", cwd=tmp_path).stdout)
    assert service["resource"]["status"]["lastRun"]["instant"] == compaction.requested_time  # its message
    described = json.loads(weir("describe", "lw", "customers-profile", "--json", cwd=tmp_path).stdout)
    assert any(e["reason"] == "Submitted" for e in described["events"])
    assert described["resource"]["status"]["submissionId"]
