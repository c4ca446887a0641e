"""Many writer processes upsert random keys into one table under OCC (without and with every early
conflict detection strategy) and NBCC, with a real ZooKeeper lock on local disk and with the storage
lock on the S3 emulator; the history checker proves no committed update is lost, every abort was a
true conflict and no early abort was needless."""

import json
import os
import subprocess
import sys
import uuid
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.config import LockSpec
from tests.lakecore.concurrency.history import check, load_log
from tests.lakecore.concurrency.writer_process import batch

pytestmark = pytest.mark.slow
WRITERS, COMMITS, SEED = 8, 50, 7
SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.int64()), ("seq", pa.int64()), ("v", pa.float64())])


def batch_of(tag: str) -> pa.Table:
    writer, n = tag[1:].split("-")
    return batch(int(writer), int(n), SEED)


@dataclass(frozen=True)
class Setup:
    """Where the table lives, which lock it records, and how many writers commit how often."""

    uri: str
    lock: LockSpec
    writer_lock: str  # writer_process's LOCK argument
    storage_options: dict[str, Any] | None
    writers: int
    commits: int


def run_writers(uri: str, connect: str, log: str, *, writers: int = WRITERS, commits: int = COMMITS,
                storage_options: dict[str, Any] | None = None, flags: tuple[str, ...] = ()) -> None:
    module = "tests.lakecore.concurrency.writer_process"
    args = [str(commits), str(SEED), log, *flags]
    env = {**os.environ, "WEIR_TEST_STORAGE_OPTIONS": json.dumps(storage_options)}
    procs = [subprocess.Popen([sys.executable, "-m", module, uri, connect, str(w), *args],
                              stderr=subprocess.PIPE, text=True, env=env)
             for w in range(writers)]
    errors = [p.communicate(timeout=600)[1] for p in procs]  # every pipe drained and closed first
    for p, err in zip(procs, errors, strict=True):
        assert p.returncode == 0, err


@pytest.fixture(params=[pytest.param("zookeeper", marks=pytest.mark.zookeeper),
                        pytest.param("s3-storage-lock", marks=pytest.mark.s3)])
def setup(request: pytest.FixtureRequest, tmp_path: Any) -> Setup:
    if request.param == "zookeeper":
        connect = request.getfixturevalue("zookeeper_server").connect_string
        return Setup(str(tmp_path / "t"), LockSpec("zookeeper", connect=connect), connect, None, WRITERS,
                     COMMITS)
    server = request.getfixturevalue("s3_server")
    bucket = f"weir-{uuid.uuid4().hex[:12]}"
    server.client().create_bucket(Bucket=bucket)
    # bounded: a few writers and commits, every one of them several S3 round trips under the lock
    return Setup(f"s3://{bucket}/t", LockSpec("storage"), "recorded", server.s3fs_options(), 3, 6)


@pytest.mark.parametrize("mode", ["optimistic", "non_blocking"])
def test_concurrent_writers_match_a_serial_replay(tmp_path, setup, mode):
    Table.create(setup.uri, schema=SCHEMA, record_key="id", buckets=16, concurrency_mode=mode,
                 lock=setup.lock, storage_options=setup.storage_options)
    log = str(tmp_path / "log.jsonl")
    run_writers(setup.uri, setup.writer_lock, log, writers=setup.writers, commits=setup.commits,
                storage_options=setup.storage_options)
    entries = load_log(log)
    assert len(entries) == setup.writers * setup.commits
    verdict = check(Table.open(setup.uri, storage_options=setup.storage_options), entries, batch_of)
    if setup.commits * setup.writers > 100:
        assert verdict.archived > 0, "inline archival never ran beside the writers"
    if mode == "non_blocking":
        assert verdict.conflicts == 0
    else:
        assert verdict.committed + verdict.conflicts == setup.writers * setup.commits
        assert verdict.conflicts > 0, "the run never produced a conflict: the test proves nothing"


@pytest.mark.zookeeper
@pytest.mark.parametrize("strategy", ["direct", "direct_zk", "marker_service"])
def test_writers_with_early_detection_match_a_serial_replay_and_abort_only_for_live_writers(
        tmp_path, zookeeper_server, strategy):
    commits = 20
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=16,
                 lock=LockSpec("zookeeper", connect=zookeeper_server.connect_string))
    log = str(tmp_path / "log.jsonl")
    run_writers(uri, zookeeper_server.connect_string, log, commits=commits, flags=(f"early={strategy}",))
    entries = load_log(log)
    assert len(entries) == WRITERS * commits
    verdict = check(Table.open(uri), entries, batch_of)
    assert verdict.committed + verdict.conflicts + verdict.early == WRITERS * commits
    assert verdict.early > 0, "no early abort happened: the test proves nothing"
