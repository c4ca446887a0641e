"""A full disk is a StorageError (StorageFull, the documented error of the Python API), never a bare
OSError, wherever it strikes: while writing a data file, while drawing the instant (the lock's and the
timeline's small files), while creating a table. Nothing half-written is left (no temp file, no
partial Parquet file), the table reads as before while the disk is full, and once space is freed the
next write commits. A real full disk: a 2 MiB tmpfs mounted in a private mount namespace (as root, or
as a user namespace's root), which disappears with the process that uses it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import running_in_ci

WRITER = Path(__file__).with_name("full_disk_writer.py")
ROOT = Path(__file__).resolve().parents[3]


def on_a_small_disk(disk: Path) -> dict:
    if shutil.which("unshare") is None:
        reason = "util-linux's unshare is missing"
    else:
        user = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
        command = [*["unshare", *user, "--mount", "--propagation", "private"], "sh", "-c",
                   f'mount -t tmpfs -o size=2m tmpfs "{disk}" && exec "{sys.executable}" "{WRITER}" "{disk}"']
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, check=False)
        if done.returncode == 0:
            return json.loads(done.stdout.strip().splitlines()[-1])
        if "mount" not in done.stderr and "unshare" not in done.stderr:
            raise AssertionError(done.stderr)
        reason = f"cannot mount a tmpfs in a private namespace here: {done.stderr.strip()}"
    if running_in_ci():
        pytest.fail(f"the full-disk test needs a tmpfs mount under CI: {reason}", pytrace=False)
    pytest.skip(reason)


def test_a_full_disk_raises_storage_full_and_leaves_nothing_half_written(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    out = on_a_small_disk(disk)
    for where in ("data_files", "upsert", "create"):
        error = out[where]
        assert error is not None, f"{where}: the write did not fail on a full disk"
        assert error["type"] == "StorageFull" and error["storage_error"] and not error["os_error"], error
        assert "No space left on device" in error["message"] and "free space" in error["message"], error
    assert ".log." in out["data_files"]["message"], "the data file that did not fit is named"
    assert out["read_while_full"] and out["half_written"] == []
    assert out["after_freeing"] is None and out["rows_after_freeing"] == out["rows_before"] + 50
