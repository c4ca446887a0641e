"""`weir run -f m` in a test's own directory through the real command (CliRunner; the working directory is
the test's for the call, so relative paths in the manifests resolve there), or as its own process
(`weir_process`: Spark drivers run), and a small LakeTable."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from typer.testing import CliRunner

from lakeoperator.cli import app

TABLE = """apiVersion: weir.dev/v1alpha1
kind: LakeTable
metadata:
  name: people
spec:
  location: lake/people
  schema:
    - {name: id, type: int64}
    - {name: name, type: string}
  recordKey: [id]
"""


def weir_run(work: Path, files: Mapping[str, str], *args: str) -> tuple[int, str, str]:
    """Write `files` into work/m, run `weir run -f m ARGS` in `work`: (exit code, stdout, stderr)."""
    (work / "m").mkdir(exist_ok=True)   # a test may have put inputs there
    for name, text in files.items():
        (work / "m" / name).write_text(text)
    before = Path.cwd()
    os.chdir(work)
    try:
        result = CliRunner().invoke(app, ["run", "-f", "m", *args])
    finally:
        os.chdir(before)
    return result.exit_code, result.stdout, result.stderr


ROOT = Path(__file__).resolve().parents[2]


WEIR = [sys.executable, "-c", "from lakeoperator.cli import app; app()"]


def weir_env() -> dict[str, str]:
    """The environment of a `weir` process: this checkout's packages, this Python for Spark."""
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}


def weir_process(work: Path, *args: str, timeout: float = 500) -> subprocess.CompletedProcess[str]:
    """`weir ARGS` as its own process in `work`, until it ends."""
    return subprocess.run([*WEIR, *args], cwd=work, env=weir_env(), capture_output=True, text=True,
                          timeout=timeout)


def weir_popen(work: Path, *args: str) -> subprocess.Popen[str]:
    """`weir ARGS` started as its own process (and session) in `work`; stdout and stderr together."""
    return subprocess.Popen([*WEIR, *args], cwd=work, env=weir_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def killed(proc: subprocess.Popen[str]) -> None:
    """A `weir_popen` process that is still running killed with its session (a test's clean-up)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
