"""The `weir` script (pyproject.toml's entry point) without an extra: its table commands run, and a
command that needs a missing extra says in one line which `pip install 'weir[EXTRA]'` brings it and exits
1 — the operator's commands without `operator`, a ZooKeeper-locked table without `zookeeper`, an s3://
table without `s3`. The extras are made missing here by blocking their modules (`sys.modules[name] =
None`); test_a_plain_pip_install_runs_weir.py installs the project without extras for real."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.config import LockSpec

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["weir"]
OPERATOR_MODULES = ("yaml", "croniter", "kopf", "kubernetes", "jsonschema", "prometheus_client")


def weir(*args: str, blocked: tuple[str, ...], cwd: Path) -> subprocess.CompletedProcess[str]:
    module, _, attr = SCRIPT.partition(":")
    code = (f"import sys\nfor name in {blocked!r}:\n    sys.modules[name] = None\n"
            f"import {module}\n{module}.{attr}()")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}", "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120, check=False)


def one_line(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in done.stderr, done.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("command", [("run", "-f", "manifests"), ("operator", "--namespace", "lake")])
def test_the_operators_commands_name_the_operator_extra(tmp_path: Path, command: tuple[str, ...]) -> None:
    one_line(weir(*command, blocked=OPERATOR_MODULES, cwd=tmp_path), "pip install 'weir[operator]'")
    assert list(tmp_path.iterdir()) == [], "nothing was made"


def test_without_the_operator_extra_help_lists_each_command_and_the_extra(tmp_path: Path) -> None:
    listed = weir("--help", blocked=OPERATOR_MODULES, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    for command in ("run", "get", "describe", "demo", "operator", "table"):
        assert f" {command} " in listed.stdout, listed.stdout
    assert "pip install 'weir[operator]'" in listed.stdout


def test_a_zookeeper_table_names_the_zookeeper_extra(tmp_path: Path) -> None:
    Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]), record_key="id",
                 lock=LockSpec("zookeeper", connect="127.0.0.1:1"))
    (tmp_path / "in.csv").write_text("id\n1\n")
    one_line(weir("table", "upsert", "t", "-i", "in.csv", blocked=("kazoo",), cwd=tmp_path),
             "'kazoo'", "pip install 'weir[zookeeper]'")


def test_an_s3_table_names_the_s3_extra(tmp_path: Path) -> None:
    one_line(weir("table", "read", "s3://bucket/t", blocked=("s3fs",), cwd=tmp_path),
             "'s3fs'", "pip install 'weir[s3]'")
