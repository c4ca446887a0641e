"""A writer process killed with SIGKILL on this machine is known dead at once, not only once its
heartbeat expires: `weir table describe` says so, and `weir table rollback` rolls its write back without
being forced. A live writer process stays alive, a record from another machine or PID namespace is
left to the heartbeat, and a write that ends leaves no record behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app
from lakecore.concurrency.liveness.heartbeat import PROCESSES_DIR, writer_gone, writer_path
from lakecore.concurrency.processes import process_space
from lakecore.table import AfterCommitOptions, WriterOptions
from tests.lakecore.concurrency.locks.test_lock_contract import REPO_ROOT

# a writer that begins a write, beats every 60 s (so its heartbeat stays fresh for 3 minutes), says
# which instant once its process is recorded, and waits to be killed
WRITER = textwrap.dedent("""
    import os, sys, time
    from lakecore import Table
    from lakecore.concurrency import begin_write
    from lakecore.concurrency.liveness.heartbeat import Heartbeat, HeartbeatConfig, writer_path
    table = Table.open(sys.argv[1])
    txn = begin_write(table.storage, table.config, table.lock, "upsert")
    t = txn.instant.requested_time
    Heartbeat(table.storage, t, HeartbeatConfig(interval_s=60)).start()
    while not table.storage.exists(writer_path(t)):
        time.sleep(0.01)
    print(t, flush=True)
    time.sleep(600)
""")


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([1] * len(ids), pa.int64())})


def pending(uri: str) -> dict[str, dict[str, Any]]:
    result = CliRunner().invoke(app, ["table", "describe", uri, "--json"])
    assert result.exit_code == 0, result.output
    return {p["instant"]: p for p in json.loads(result.output)["activity"]["pending"]}


def start_writer(uri: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, uri], cwd=REPO_ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line, proc.communicate()[1]
    return proc, line


def test_a_killed_writer_is_dead_at_once_and_a_live_one_is_alive(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    Table.create(uri, schema=rows([]).schema, record_key="id", ordering_field="ts",
                 table_type="merge_on_read", buckets=1)
    killed, dead_t = start_writer(uri)
    live, live_t = start_writer(uri)
    try:
        assert pending(uri)[dead_t]["alive"] is True
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        now = pending(uri)
        # its heartbeat is fresh (60-s interval), yet its process is gone
        assert now[dead_t]["last_sign_of_life_s_ago"] < 60
        assert now[dead_t]["alive"] is False and now[live_t]["alive"] is True, now

        runner = CliRunner()
        dry = runner.invoke(app, ["table", "rollback", uri, dead_t, "--json"])   # who runs it: nobody
        assert dry.exit_code == 0 and json.loads(dry.output)["live"] is None, dry.output
        dry_live = runner.invoke(app, ["table", "rollback", uri, live_t, "--json"])
        assert json.loads(dry_live.output)["live"], dry_live.output
        refused = runner.invoke(app, ["table", "rollback", uri, live_t, "--yes"])
        assert refused.exit_code != 0 and "alive" in refused.output, refused.output
        done = runner.invoke(app, ["table", "rollback", uri, dead_t, "--yes", "--json"])
        assert done.exit_code == 0 and json.loads(done.output)["rollback"], done.output
        assert dead_t not in pending(uri) and live_t in pending(uri)
        table = Table.open(uri)
        assert not table.storage.exists(writer_path(dead_t))   # the rollback took its record too
    finally:
        for proc in (killed, live):
            proc.kill()
            proc.communicate()


def test_a_record_from_elsewhere_is_left_to_the_heartbeat(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    table = Table.create(uri, schema=rows([]).schema, record_key="id", ordering_field="ts", buckets=1)
    gone_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                              capture_output=True, text=True).stdout.strip()
    here = {"host": socket.gethostname(), "process": process_space(), "pid": int(gone_pid)}
    for name, record in (("here", here), ("other-host", {**here, "host": "elsewhere"}),
                         ("other-space", {**here, "process": "another-boot/pid:[1]"}),
                         ("alive", {**here, "pid": os.getpid()}), ("garbled", None)):
        body = b"{not json" if record is None else json.dumps(record).encode()
        table.storage.write(writer_path(name), body)
    assert [n for n in ("here", "other-host", "other-space", "alive", "garbled", "missing")
            if writer_gone(table.storage, n)] == ["here"]


def test_a_write_that_ends_leaves_no_record(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    Table.create(uri, schema=rows([]).schema, record_key="id", ordering_field="ts", buckets=1)
    table = Table.open(uri, options=WriterOptions(after_commit=AfterCommitOptions(clean_failed_writes=False)))
    for i in range(3):
        table.upsert(rows([i]))
    assert [info.path for info in table.storage.list_dir(PROCESSES_DIR)] == []
