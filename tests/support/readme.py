"""The shell commands of a README's code blocks, to run as written: the blocks of one part of the file,
and a `bin` folder whose `weir` and `python` stand for `.venv/bin/weir` and `.venv/bin/python` (this
interpreter and this checkout, whichever virtualenv the tests run in). `DUCKDB_CLI` is the DuckDB
command line the README's queries run (`make readers` makes it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ".venv/bin/"
DUCKDB_CLI = ROOT / ".tools" / "bin" / "duckdb"


def code_blocks(path: Path, start: str, end: str) -> list[str]:
    """The ```sh blocks of `path` between the first line starting with `start` and the next with `end`."""
    text = "\n" + path.read_text()
    begin = text.index(f"\n{start}")
    part = text[begin:text.index(f"\n{end}", begin + 1)]
    return re.findall(r"```sh\n(.*?)```", part, flags=re.S)


def shims(folder: Path) -> Path:
    """A bin folder with `weir` and `python` for this interpreter and checkout."""
    folder.mkdir(parents=True, exist_ok=True)
    scripts = {"weir": f'exec "{sys.executable}" -c "import sys; sys.argv[0] = \'weir\'; '
                       f'from lakeoperator.cli import app; app()" "$@"',
               "python": f'exec "{sys.executable}" "$@"'}
    for name, line in scripts.items():
        (folder / name).write_text(f"#!/bin/sh\n{line}\n")
        (folder / name).chmod(0o755)
    return folder


def run_block(block: str, *, cwd: Path, bin_dir: Path, replace: dict[str, str] | None = None,
              timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a block in bash, stopping at the first failing command: `.venv/bin/` is `bin_dir`, and
    `replace` maps other text of the block (a path under /tmp) to the test's own."""
    script = block.replace(VENV_BIN, f"{bin_dir}/")
    for old, new in (replace or {}).items():
        script = script.replace(old, new)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
