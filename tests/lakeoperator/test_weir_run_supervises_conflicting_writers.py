"""`weir run` supervises like the operator: two batch writers of one file group, both held mid-write
(files and markers written); the younger loses — the decision in both writers' status and Events, its
driver (a local process) stops on its own (it hears the proof of death on storage: no ZooKeeper here),
waits for the winner, restarts and succeeds; the table holds both inputs merged by their ordering
field."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from tests.support.operator import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
WEIR = "weir.dev/v1alpha1"


def manifest(path: Path, body: dict[str, Any]) -> None:
    path.write_text(json.dumps(body))   # JSON is YAML


def writer(work: Path, name: str) -> dict[str, Any]:
    pause = work / f"pause-{name}"
    pause.mkdir()
    (pause / "hold").touch()
    return {"apiVersion": WEIR, "kind": "LakeWriter", "metadata": {"name": name},
            "spec": {"tableRef": {"name": "orders"}, "mode": "batch",
                     "source": {"format": "parquet", "path": str(work / "input" / name)},
                     "spark": {"mode": "local", "localCores": 1, "driver": {"memory": "512m"},
                               "conf": {"spark.executorEnv.WEIR_TEST_PAUSE_DIR": str(pause)}},
                     "restartPolicy": {"backoff": {"initialSeconds": 1, "maxSeconds": 2}}}}


def rows(work: Path, name: str, ids: range, ts: int) -> list[dict[str, int]]:
    (work / "input" / name).mkdir(parents=True)
    data = [{"id": i, "amount": i * ts, "ts": ts} for i in ids]
    pq.write_table(pa.Table.from_pylist(data, schema=pa.schema([("id", pa.int64()), ("amount", pa.int64()),
                                                                 ("ts", pa.int64())])),
                   work / "input" / name / "part-0.parquet")
    return data


def state(work: Path, name: str) -> dict[str, Any]:
    f = work / ".weir-run" / "resources" / "LakeWriter" / f"default.{name}.json"
    return json.loads(f.read_text()) if f.exists() else {}


def test_weir_run_stops_the_younger_writer_then_restarts_it(tmp_path: Path) -> None:
    work = tmp_path
    (work / "manifests").mkdir()
    first = rows(work, "first", range(0, 10), ts=1)
    second = rows(work, "second", range(5, 15), ts=2)
    manifest(work / "manifests" / "table.yaml", {
        "apiVersion": WEIR, "kind": "LakeTable", "metadata": {"name": "orders"},
        "spec": {"location": str(work / "lake" / "orders"), "recordKey": ["id"], "orderingField": "ts",
                 "buckets": 1, "schema": [{"name": "id", "type": "int64", "nullable": False},
                                          {"name": "amount", "type": "int64"},
                                          {"name": "ts", "type": "int64"}]}})
    for name in ("first", "second"):
        manifest(work / "manifests" / f"{name}.yaml", writer(work, name))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    run = subprocess.Popen([sys.executable, "-c", "from lakeoperator.cli import app; app()", "run", "-f",
                            "manifests", "--timeout", "400"], cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        def decided() -> dict[str, Any] | None:
            for name in ("first", "second"):
                status = (state(work, name).get("body") or {}).get("status") or {}
                conflict = status.get("lastConflict") or {}
                if conflict.get("role") == "Lost":
                    return {"loser": name, **conflict}
            return None

        lost = wait_until(decided, timeout=240)
        loser = lost["loser"]
        winner = "first" if loser == "second" else "second"
        wait_until(lambda: state(work, loser)["body"]["status"].get("phase") == "BackingOff", timeout=60)
        won = state(work, winner)["body"]["status"]["lastConflict"]
        assert won["role"] == "Won" and won["other"] == lost["instant"]
        assert "ConflictLost" in [e["reason"] for e in state(work, loser)["events"]]
        for name in ("first", "second"):
            (work / f"pause-{name}" / "hold").unlink()
        out, _ = run.communicate(timeout=300)
        assert run.returncode == 0, out[-3000:]
    finally:
        if run.poll() is None:
            os.killpg(run.pid, 9)
            run.wait()
    statuses = {name: state(work, name)["body"]["status"] for name in ("first", "second")}
    assert [h["cause"] for h in statuses[loser]["history"]] == ["conflict", "success"]
    assert [h["cause"] for h in statuses[winner]["history"]] == ["success"]
    expected = {r["id"]: r for r in first} | {r["id"]: r for r in second}   # ts 2 wins where both wrote
    got = sorted(Table.open(str(work / "lake" / "orders")).read().to_pylist(), key=lambda r: r["id"])
    assert got == [expected[k] for k in sorted(expected)]
