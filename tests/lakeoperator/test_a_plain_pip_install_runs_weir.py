"""`pip install weir` with no extras, in a fresh virtualenv, gives a `weir` whose table commands run
(create, upsert, read) and whose operator commands say which extra to install; with the `operator` extra
added, `weir run --help` works. The project is built once into a wheel (from a copy of what the images'
build context holds, so the checkout is not written to) and installed from it twice; pip fetches the
dependencies from its index or its cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "lakecore", "sparkjobs", "operator/lakeoperator")


def run(*cmd: str | Path, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env={**env, "COLUMNS": "100"}, capture_output=True,
                          text=True, timeout=timeout, check=False)


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, f"{done.args}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_a_plain_install_runs_table_commands_and_names_the_operator_extra(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy(ROOT / name, src / name)
    ok(run(sys.executable, "-m", "venv", tmp_path / "venv", cwd=tmp_path))
    pip, weir = tmp_path / "venv" / "bin" / "pip", tmp_path / "venv" / "bin" / "weir"
    ok(run(pip, "wheel", "--no-deps", "--wheel-dir", tmp_path / "wheel", src, cwd=tmp_path))
    wheel = next((tmp_path / "wheel").glob("weir-*.whl"))
    ok(run(pip, "install", "--no-compile", wheel, cwd=tmp_path))

    (tmp_path / "people.csv").write_text("id,name,ts\n1,ada,1\n2,grace,1\n")
    ok(run(weir, "table", "create", "lake/people", "--schema", "id:int64,name:string,ts:int64",
           "--record-key", "id", "--ordering-field", "ts", cwd=tmp_path))
    ok(run(weir, "table", "upsert", "lake/people", "-i", "people.csv", cwd=tmp_path))
    read = ok(run(weir, "table", "read", "lake/people", "--format", "json", cwd=tmp_path))
    assert sorted((r["id"], r["name"]) for r in map(json.loads, read.stdout.splitlines())) == \
        [(1, "ada"), (2, "grace")]

    refused = run(weir, "run", "-f", "manifests", cwd=tmp_path)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    assert "pip install 'weir[operator]'" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / ".weir-run").exists()

    ok(run(pip, "install", "--no-compile", f"{wheel}[operator]", cwd=tmp_path))
    helped = ok(run(weir, "run", "--help", cwd=tmp_path))
    assert "--filename" in helped.stdout
