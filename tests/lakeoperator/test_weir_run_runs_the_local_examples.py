"""`weir run -f crds/examples/local/` on this machine, as the README (part 3 of "The first five minutes")
and crds/examples/local/README.md write it, with the inputs the repository ships: the LakeTable is
created, both writers' Spark jobs run as local processes (spark-submit, local[1]) and fill their column
groups of one wide table, the compaction service runs once two delta commits are there (its lastRun
names its instant, from the job's termination message), and `weir get` / `weir describe` show what
happened. The table then equals the join of the two inputs. The commands run in a copy of the
repository's crds/examples/local (the run writes lake/ and .weir-run/ where it starts)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.json as pjson
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from tests.support.readme import code_blocks, run_block, shims

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "crds" / "examples" / "local"


def weir(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    return subprocess.run([sys.executable, "-c", "from lakeoperator.cli import app; app()", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)


def expected() -> dict[str, dict[str, Any]]:
    """The join of the shipped inputs: every profile, with its activity where there is one."""
    profiles = pq.read_table(EXAMPLES / "input" / "profile").to_pylist()
    activity = {r["customer_id"]: r for f in sorted((EXAMPLES / "input" / "activity").glob("*.json"))
                for r in pjson.read_json(f).to_pylist()}
    empty = {"orders": None, "total_spent": None, "activity_ts": None}
    return {p["customer_id"]: {**p, **{k: (activity.get(p["customer_id"]) or empty)[k] for k in empty}}
            for p in profiles}


def test_the_local_examples_run_as_the_readmes_write_them(tmp_path):
    block = code_blocks(ROOT / "README.md", "**3. Your own tables", "**4. On a cluster.**")[0]
    assert code_blocks(EXAMPLES / "README.md", "# A local run", "- `table.yaml`") == [block]
    assert "weir run -f crds/examples/local/" in block
    shutil.copytree(EXAMPLES, tmp_path / "crds" / "examples" / "local")
    ran = run_block(block, cwd=tmp_path, bin_dir=shims(tmp_path / "bin"), timeout=600)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "LakeWriter/customers-profile: Succeeded" in ran.stdout and "customers: 6 rows" in ran.stdout
    got = {r["customer_id"]: r for r in Table.open(str(tmp_path / "lake" / "customers")).read().to_pylist()}
    assert got == expected() and sum(r["orders"] is not None for r in got.values()) == 4
    listed = json.loads(weir("get", "--json", cwd=tmp_path).stdout)
    phases = {r["name"]: r["phase"] for r in listed}
    assert phases["customers-profile"] == "Succeeded" and phases["customers-activity"] == "Succeeded", listed
    assert phases["customers"] == "Ready"
    timeline = Table.open(str(tmp_path / "lake" / "customers")).timeline()
    assert [i.action for i in timeline.completed].count("compaction") == 1
    compaction = next(i for i in timeline.completed if i.action == "compaction")
    done = f"runs=1 last=success {compaction.requested_time}"
    assert {r["name"]: r["detail"] for r in listed}["customers-compaction"] == done, listed
    # the run shows in the progress as it starts and as it ends
    assert "\nTableService/customers-compaction: Running customers-compaction-" in ran.stdout, ran.stdout
    assert f"\nTableService/customers-compaction: WaitingForCommits {done}\n" in ran.stdout, ran.stdout
    service = json.loads(weir("describe", "lts", "customers-compaction", "--json", cwd=tmp_path).stdout)
    assert service["resource"]["status"]["lastRun"]["instant"] == compaction.requested_time  # its message
    described = json.loads(weir("describe", "lw", "customers-profile", "--json", cwd=tmp_path).stdout)
    assert any(e["reason"] == "Submitted" for e in described["events"])
    assert described["resource"]["status"]["submissionId"]
