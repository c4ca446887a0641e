"""With ZooKeeper down, a write to a table locked on ZooKeeper prints exactly its one-line error on stderr:
kazoo's reconnect attempts ("Connection dropped: ...") and any other library's log lines stay quiet
unless --debug, which shows them, named. A real unreachable address: a closed port on 127.0.0.1; the client
keeps trying to connect (kazoo retrying, and logging, every 0.05-1 s) for the connection timeout that
WEIR_ZOOKEEPER_CONNECTION_TIMEOUT_S sets (2 s here, rather than the default 15), and the message says so."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def weir(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WEIR_ZOOKEEPER_CONNECTION_TIMEOUT_S": "2"}
    return subprocess.run([sys.executable, "-c", "from lakecore.cli.main import main; main()", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_zookeeper_down_prints_one_line_and_debug_shows_kazoo(tmp_path: Path) -> None:
    port = closed_port()
    made = weir("table", "create", "t", "--schema", "id:int64", "--record-key", "id",
                "--zookeeper", f"127.0.0.1:{port}", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    (tmp_path / "in.csv").write_text("id\n1\n")

    quiet = weir("table", "upsert", "t", "-i", "in.csv", cwd=tmp_path)
    assert quiet.returncode == 1 and quiet.stdout == ""
    assert quiet.stderr.splitlines() == [quiet.stderr.strip()], quiet.stderr
    assert quiet.stderr.startswith(f"error: cannot reach ZooKeeper at 127.0.0.1:{port} within 2.0s"), \
        quiet.stderr

    loud = weir("--debug", "table", "upsert", "t", "-i", "in.csv", cwd=tmp_path)
    assert loud.returncode == 1
    assert "WARNING kazoo.client: Connection dropped" in loud.stderr, loud.stderr
    assert f"error: cannot reach ZooKeeper at 127.0.0.1:{port}" in loud.stderr
