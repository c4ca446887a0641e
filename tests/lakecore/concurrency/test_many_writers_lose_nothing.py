"""Many writer processes upsert random keys into one table under OCC (without and with every early
conflict detection strategy) and NBCC with a real ZooKeeper lock; the history checker proves no
committed update is lost, every abort was a true conflict and no early abort was needless."""

import subprocess
import sys

import pyarrow as pa
import pytest

from lakecore import Table
from tests.lakecore.concurrency.history import check, load_log
from tests.lakecore.concurrency.writer_process import batch

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]
WRITERS, COMMITS, SEED = 8, 50, 7
SCHEMA = pa.schema([("id", pa.int64()), ("writer", pa.int64()), ("seq", pa.int64()), ("v", pa.float64())])


def batch_of(tag: str) -> pa.Table:
    writer, n = tag[1:].split("-")
    return batch(int(writer), int(n), SEED)


def run_writers(uri: str, connect: str, log: str, commits: int = COMMITS,
                flags: tuple[str, ...] = ()) -> None:
    module = "tests.lakecore.concurrency.writer_process"
    args = [str(commits), str(SEED), log, *flags]
    procs = [subprocess.Popen([sys.executable, "-m", module, uri, connect, str(w), *args],
                              stderr=subprocess.PIPE, text=True)
             for w in range(WRITERS)]
    errors = [p.communicate(timeout=600)[1] for p in procs]  # every pipe drained and closed first
    for p, err in zip(procs, errors, strict=True):
        assert p.returncode == 0, err


@pytest.mark.parametrize("mode", ["optimistic", "non_blocking"])
def test_concurrent_writers_match_a_serial_replay(tmp_path, zookeeper_server, mode):
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=16, concurrency_mode=mode)
    log = str(tmp_path / "log.jsonl")
    run_writers(uri, zookeeper_server.connect_string, log)
    entries = load_log(log)
    assert len(entries) == WRITERS * COMMITS
    verdict = check(Table.open(uri), entries, batch_of)
    assert verdict.archived > 0, "inline archival never ran beside the writers"
    if mode == "non_blocking":
        assert verdict.conflicts == 0
    else:
        assert verdict.committed + verdict.conflicts == WRITERS * COMMITS
        assert verdict.conflicts > 0, "the run never produced a conflict: the test proves nothing"


@pytest.mark.parametrize("strategy", ["direct", "direct_zk", "marker_service"])
def test_writers_with_early_detection_match_a_serial_replay_and_abort_only_for_live_writers(
        tmp_path, zookeeper_server, strategy):
    commits = 20
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=16)
    log = str(tmp_path / "log.jsonl")
    run_writers(uri, zookeeper_server.connect_string, log, commits, (f"early={strategy}",))
    entries = load_log(log)
    assert len(entries) == WRITERS * commits
    verdict = check(Table.open(uri), entries, batch_of)
    assert verdict.committed + verdict.conflicts + verdict.early == WRITERS * commits
    assert verdict.early > 0, "no early abort happened: the test proves nothing"
