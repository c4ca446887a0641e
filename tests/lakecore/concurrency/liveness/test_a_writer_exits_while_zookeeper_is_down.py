"""A process with an abort watch on ZooKeeper (every writer has one) ends when it is done even if
ZooKeeper went away meanwhile: kazoo's exit hook joins its worker threads, and a worker reading the
watched node while ZooKeeper is unreachable never returns — before the fix, such a writer (a Spark
driver) hung at exit and its pod never ended."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper]
ROOT = Path(__file__).resolve().parents[4]

CHILD = r"""
import sys, time
from lakecore.concurrency.liveness.aborts import AbortWatch
from lakecore.storage import open_storage
storage = open_storage(sys.argv[2])
watch = AbortWatch(storage, "20261123120000000", lambda record: None, table_uri=sys.argv[2], check_s=600,
                   zookeeper=sys.argv[1]).start()
print("watching", flush=True)
sys.stdin.readline()   # ZooKeeper is stopped meanwhile
time.sleep(2)          # the watch's node is read again while ZooKeeper is unreachable
print("done", flush=True)
"""


def test_a_writer_process_exits_while_zookeeper_is_down(zookeeper_factory: Callable[[], ZooKeeperServer],
                                                         tmp_path: Path) -> None:
    zk = zookeeper_factory()
    child = subprocess.Popen([sys.executable, "-c", CHILD, zk.connect_string, str(tmp_path / "t")],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "watching"
        zk.stop(kill=True)
        child.stdin.write("\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=60)   # hung forever before the fix
        assert "done" in out and child.returncode == 0, err[-2000:]
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
