"""`weir run -f m` in a test's own directory through the real command (CliRunner; the working directory is
the test's for the call, so relative paths in the manifests resolve there), and a small LakeTable."""

from __future__ import annotations

import os
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
