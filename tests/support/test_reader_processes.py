"""A reader process reports an engine's refusal and keeps serving, is stopped by pid, and turns its own
death into an error naming its log; an environment that is not built (or older than its pins) says to run
`make readers`; the REST catalog server listens on 127.0.0.1 only and stops by pid."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pyarrow as pa
import pytest

from tests.support.fixtures import require
from tests.support.readers import ReaderError, ReaderProcessDied, Readers, RestCatalogServer
from tests.support.readers.environments import Environment, Part
from tests.support.zookeeper import port_is_open


@pytest.fixture
def own_readers(tmp_path: Path) -> Iterator[Readers]:
    """Readers of this test's own (the session's are shared): free to be stopped or killed."""
    readers = Readers(tmp_path / "readers", require)
    yield readers
    readers.close()


@pytest.mark.readers
def test_a_refused_read_raises_the_engines_message_and_the_process_serves_on(
        own_readers: Readers, tmp_path: Path) -> None:
    from deltalake import write_deltalake

    missing = tmp_path / "nowhere" / "v1.metadata.json"
    with pytest.raises(ReaderError, match=r"duckdb iceberg: .*nowhere/v1\.metadata\.json"):
        own_readers.duckdb_iceberg(missing)
    write_deltalake(tmp_path / "table", pa.table({"id": pa.array([7], pa.int64())}))
    assert own_readers.duckdb_delta(tmp_path / "table").column("id").to_pylist() == [7]


@pytest.mark.readers
def test_close_stops_the_reader_processes_by_pid(own_readers: Readers) -> None:
    pid = own_readers.process("duckdb").pid
    assert pid is not None and psutil.pid_exists(pid)
    own_readers.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.readers
def test_a_reader_that_died_is_an_error_naming_its_log_and_the_next_read_starts_another(
        own_readers: Readers, tmp_path: Path) -> None:
    process = own_readers.process("duckdb")
    pid = process.pid
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ReaderProcessDied, match=r"the duckdb reader .*; the end of .*duckdb\.log"):
        process.call("delta", path=str(tmp_path))
    assert own_readers.process("duckdb").pid not in (None, pid)


def test_an_environment_not_built_or_older_than_its_pins_says_to_run_make_readers(tmp_path: Path) -> None:
    pins = tmp_path / "requirements.txt"
    pins.write_text("duckdb==1.4.4\n")
    stamp = tmp_path / ".tools" / "duckdb" / "venv" / ".built"
    environment = Environment("duckdb", stamp.parent.parent, (Part(stamp, (pins,)),))
    assert "is not built: run `make readers`" in (environment.missing_reason() or "")
    stamp.parent.mkdir(parents=True)
    stamp.touch()
    assert environment.missing_reason() is None
    later = time.time() + 10
    os.utime(pins, (later, later))
    assert "is older than its pins: run `make readers`" in (environment.missing_reason() or "")


@pytest.mark.readers
def test_the_rest_catalog_listens_on_loopback_only_and_stops_by_pid(tmp_path: Path) -> None:
    from tests.support.readers.environments import rest_catalog_environment

    require("Apache Iceberg's REST catalog", rest_catalog_environment().missing_reason())
    with RestCatalogServer(tmp_path) as server:
        pid = server.pid
        assert pid is not None
        listening = {c.laddr for c in psutil.Process(pid).net_connections() if c.status == psutil.CONN_LISTEN}
        assert {(address.ip.removeprefix("::ffff:"), address.port) for address in listening} == \
            {("127.0.0.1", server.port)}
        assert server.catalog().list_namespaces() == []
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not port_is_open(server.port)
