"""A driver that `weir run` stops as it ends (Ctrl-C, a timeout) mid-write leaves a pending instant. Its
process is gone, but its heartbeat is fresh: `weir table describe` called the write "alive" for up to a
heartbeat timeout (~30 s), and a writer starting right after the run waited as long before rolling it
back. Now the run records the write's proof of death as it settles: described "aborted", rolled back by
the next write at once. A pending write of the same writer name from another submission (another run,
another state directory) is left alone. A driver that dies mid-run (kill -9, out of memory) has its write
aborted by the next step the same way.

The real reconcile loop (lakeoperator.local.Runner) with its local launcher and the supervisor; the
driver's `spark-submit` is a stand-in program that starts a real lakecore write (registered in the
table's writer registry with its LakeWriter and submission, as sparkjobs' writers do) and waits."""

from __future__ import annotations

import os
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import RegistrationOptions, Table, WriterOptions
from lakecore.concurrency.liveness.writers import StorageWriterRegistry
from lakecore.table.writer import WriteJob
from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.local import Runner, StateDir, apply
from tests.lakeoperator.test_weir_describe_and_get_read_as_kubectl import manifests

STAND_IN = """\
#!{python}
import os, pathlib, time
from lakecore import RegistrationOptions, Table, WriterOptions
from lakecore.concurrency.liveness.writers import StorageWriterRegistry
from lakecore.table.writer import WriteJob
t = Table.open({lake!r})
options = WriterOptions(registration=RegistrationOptions(StorageWriterRegistry(t.storage)))
job = WriteJob.start(t.storage, t.config, t.lock, "upsert", options)
pathlib.Path({started!r} + ".pid").write_text(str(os.getpid()))
pathlib.Path({started!r}).write_text(job.instant.requested_time)
time.sleep(300)
"""


def _manifests(lake: Path) -> list[dict[str, Any]]:
    table, writer = manifests(lake)
    writer["spec"].update(mode="streaming", operation="upsert", trigger={"intervalSeconds": 5})
    return [table, writer]


def _pending(lake: Path) -> dict[str, dict[str, object]]:
    return {p["instant"]: p for p in Table.open(str(lake)).activity()["pending"]}


SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64())])


def _run(tmp_path: Path) -> tuple[Path, Path, LocalLauncher, Runner]:
    """The table, where the stand-in driver says which instant it writes, and a run of its writer."""
    lake = tmp_path / "lake" / "orders"
    Table.create(str(lake), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    started = tmp_path / "started"
    stand_in = tmp_path / "spark-submit"
    stand_in.write_text(STAND_IN.format(python=sys.executable, lake=str(lake), started=str(started)))
    stand_in.chmod(0o755)
    state = StateDir(tmp_path / "state")
    apply(state, _manifests(lake), datetime.now(UTC))
    launcher = LocalLauncher(tmp_path / "state" / "pods-state", substitute={"spark-submit": str(stand_in)})
    return lake, started, launcher, Runner(state, launcher, PodSettings())


def _until_started(runner: Runner, started: Path, tmp_path: Path) -> str:
    deadline = time.monotonic() + 60
    while not started.exists() and time.monotonic() < deadline:
        runner.step()
        time.sleep(0.2)
    assert started.exists(), [p.read_text() for p in (tmp_path / "state" / "logs").rglob("*.log")]
    runner.step()   # the supervisor's scan reads the registry with the write in it
    return started.read_text()


def test_the_write_of_a_driver_the_run_stopped_is_aborted_not_alive(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    lake, started, launcher, runner = _run(tmp_path)
    schema = SCHEMA

    # another run's driver of a writer of the same name, writing now (its heartbeat beats here)
    monkeypatch.setenv("WEIR_WRITER", "lake/orders-erase")
    monkeypatch.setenv("WEIR_SUBMISSION_ID", "orders-erase-elsewhere-1")
    t = Table.open(str(lake))
    elsewhere = WriteJob.start(t.storage, t.config, t.lock, "upsert",
                               WriterOptions(registration=RegistrationOptions(StorageWriterRegistry(t.storage))))
    try:
        try:
            stopped = _until_started(runner, started, tmp_path)
            assert _pending(lake)[stopped]["alive"] is True
        finally:
            launcher.close()
        runner.settle()
        pending = _pending(lake)
        assert pending[stopped]["aborted"] is True and pending[stopped]["alive"] is False, pending
        other = elsewhere.instant.requested_time
        assert pending[other]["aborted"] is False and pending[other]["alive"] is True, pending
    finally:
        elsewhere.abort()
    monkeypatch.delenv("WEIR_WRITER")
    monkeypatch.delenv("WEIR_SUBMISSION_ID")
    # the next write rolls the stopped one back at once, not a heartbeat timeout later
    Table.open(str(lake)).upsert(pa.table({"id": [1], "ts": [1]}, schema=schema))
    assert stopped not in _pending(lake), _pending(lake)


def test_the_write_of_a_driver_that_died_mid_run_is_aborted_by_the_next_step(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    lake, started, launcher, runner = _run(tmp_path)
    try:
        died = _until_started(runner, started, tmp_path)
        assert _pending(lake)[died]["alive"] is True
        os.kill(int(Path(f"{started}.pid").read_text()), signal.SIGKILL)
        # the steps of the next 10 s (the heartbeat timeout is 30 s): the write reads aborted at once (or is
        # gone already: the restarted driver's write rolls an aborted one back as it begins)
        def over() -> bool:
            pending = _pending(lake)
            return died not in pending or (pending[died]["aborted"], pending[died]["alive"]) == (True, False)

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not over():
            runner.step()
            time.sleep(0.2)
        assert over(), _pending(lake)
    finally:
        launcher.close()
        runner.settle()
    # the next write rolls it back at once, not a heartbeat timeout later
    Table.open(str(lake)).upsert(pa.table({"id": [1], "ts": [1]}, schema=SCHEMA))
    assert died not in _pending(lake), _pending(lake)
