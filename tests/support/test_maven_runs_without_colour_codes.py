"""`make`'s Maven (tests/support/mvn-quiet: mvn -B -q -C) writes no terminal colour codes into a log or a
pipe (Maven 3.8 writes jansi's resets, ESC[0m, even in batch mode), and a failing Maven still fails the
make step: its exit status and its errors come through."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.fixtures import require

ROOT = Path(__file__).resolve().parents[2]
MVN_QUIET = ROOT / "tests" / "support" / "mvn-quiet"


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    require("Maven", None if shutil.which("mvn") else "mvn is not installed (apt-get install -y maven)")
    return subprocess.run(["bash", str(MVN_QUIET), *args], cwd=cwd, capture_output=True, timeout=300,
                          check=False)


@pytest.mark.slow
def test_a_quiet_run_prints_nothing(tmp_path: Path) -> None:
    done = run("-f", str(ROOT / "tests" / "support" / "kafka" / "pom.xml"), "validate", cwd=tmp_path)
    assert done.returncode == 0, done
    assert done.stdout == b"" and done.stderr == b"", done


@pytest.mark.slow
def test_a_failing_run_fails_with_its_errors_and_no_colour_codes(tmp_path: Path) -> None:
    done = run("-f", str(tmp_path / "missing.xml"), "validate", cwd=tmp_path)
    assert done.returncode != 0
    assert b"missing.xml" in done.stdout and b"\x1b[" not in done.stdout, done.stdout
