"""Running a benchmark small (`--quick`) as the smoke tests do: a fresh process with this checkout on
its path, its JSON output parsed, its stderr kept for the test to read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_quick(script: str, cwd: Path, *, timeout: float = 240) -> tuple[dict[str, Any], str]:
    """(the JSON `bench/<script> --quick` printed, its stderr); fails the test if it failed."""
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]  # peers' libraries
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator"), *inherited])}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--quick"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout), done.stderr
