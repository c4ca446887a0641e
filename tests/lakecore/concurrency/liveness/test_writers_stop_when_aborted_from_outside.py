"""An abort decided outside a writer (the operator's, on a conflict between writers): its proof of death
on storage carries the decision, its flag in ZooKeeper makes the writer hear at once, and the writer
stops, rolls back and ends with the EarlyConflict built from the decision — also when the abort lands
after the writer's last look, right before its commit (refused under the table lock)."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable

import pyarrow as pa
import pytest

import lakecore.concurrency.transaction as tx
from lakecore import Table
from lakecore.concurrency.liveness.aborts import (
    AbortWatch,
    abort_flag_path,
    abort_flags,
    clear_abort_flags,
    instant_flag_path,
    raise_abort_flag,
)
from lakecore.concurrency.liveness.heartbeat import is_aborted, mark_aborted, read_aborted
from lakecore.concurrency.liveness.writers import launch_info
from lakecore.concurrency.locks.zookeeper import ZooKeeperLockConfig
from lakecore.concurrency.zookeeper import shared_clients
from lakecore.errors import EarlyConflict
from lakecore.table import AbortWatchOptions, ConflictOptions, WriteJob, WriterOptions
from lakecore.timeline import now_ms
from lakecore.write import combine_and_route, conform, list_markers, write_file_group

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
WINNER = "20261123101500123"
DECISION = {"reason": "conflict", "other": WINNER, "file_groups": [["", "0000"]],
            "decided_by": "weir-operator"}


def batch(ids, ts):
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "v": pa.array([f"{i}@{ts}" for i in ids])})


def data_files(t: Table) -> set[str]:
    return {f.path for f in t.storage.list_tree("") if ".weir" not in f.path and not f.path.startswith(".")}


def started_job(t: Table, options: WriterOptions) -> tuple[WriteJob, list]:
    """A write that has written its file groups and not yet committed."""
    job = WriteJob.start(t.storage, t.config, t.lock, "upsert", options)
    groups = combine_and_route(conform(batch([1, 2, 3], 2), t.config, "upsert").rows, t.config, "upsert")
    return job, [s for g in groups for s in write_file_group(job.context(), g)]


def assert_rolled_back(t: Table, job: WriteJob, files_before: set[str]) -> None:
    fresh = Table.open(t.uri)
    found = fresh.timeline().find(job.instant.requested_time)
    assert not fresh.timeline().pending and (found is None or not found.is_completed)
    assert data_files(t) == files_before
    assert list_markers(t.storage, job.instant.requested_time) == []


def test_a_proof_of_death_carries_the_decision_and_the_first_stays(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts")
    instant = "20261123101600456"
    assert read_aborted(t.storage, instant) is None
    assert mark_aborted(t.storage, instant, "weir-operator", 1_763_806_500_123, {**DECISION, "by": "forged"})
    assert not mark_aborted(t.storage, instant, "a rollback", 1_763_806_600_000)
    assert read_aborted(t.storage, instant) == {**DECISION, "instant": instant, "by": "weir-operator",
                                                "at": 1_763_806_500_123}
    garbled = "20261123101600457"
    t.storage.write(f".weir/aborted/{garbled}", b"\x00{not json")
    assert read_aborted(t.storage, garbled) == {} and is_aborted(t.storage, garbled)


def test_a_write_aborted_from_outside_stops_and_ends_with_the_decision(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1)
    t.upsert(batch([1], 1))
    files_before = data_files(t)
    heard: list[dict] = []
    told = threading.Event()
    watch = AbortWatchOptions(check_s=0.05, on_abort=lambda r: (heard.append(r), told.set()))
    job, stats = started_job(t, WriterOptions(abort_watch=watch))
    mark_aborted(t.storage, job.instant.requested_time, "weir-operator", now_ms(), DECISION)
    assert told.wait(30)
    assert heard == [read_aborted(t.storage, job.instant.requested_time)]
    with pytest.raises(EarlyConflict) as caught:
        job.commit(stats)
    report = caught.value.report()
    assert report["instant"] == job.instant.requested_time and report["other"] == WINNER
    assert report["file_groups"] == [["", "0000"]] and report["aborted_by"] == "weir-operator"
    assert report["bytes_written"] > 0 and report["detected_at"] == heard[0]["at"]
    assert "rerun it after write" in report["message"]
    assert_rolled_back(t, job, files_before)
    assert read_aborted(t.storage, job.instant.requested_time)["by"] == "weir-operator"  # the first stays


def test_an_abort_landing_right_before_the_commit_is_refused_under_the_lock(tmp_path, monkeypatch):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1)
    t.upsert(batch([1], 1))
    files_before = data_files(t)
    reached, go = threading.Event(), threading.Event()
    real = tx.commit_write

    def paused(txn, *a, **kw):  # after the writer's last look, before it takes the lock
        reached.set()
        assert go.wait(60)
        return real(txn, *a, **kw)

    monkeypatch.setattr("lakecore.table.writer.commit_write", paused)
    # its own look never comes in time
    job, stats = started_job(t, WriterOptions(abort_watch=AbortWatchOptions(check_s=60.0)))
    outcome: list[BaseException | object] = []
    committing = threading.Thread(target=lambda: outcome.append(_outcome(lambda: job.commit(stats))))
    committing.start()
    assert reached.wait(60)
    mark_aborted(t.storage, job.instant.requested_time, "weir-operator", now_ms(), DECISION)
    go.set()
    committing.join(60)
    (error,) = outcome
    assert isinstance(error, EarlyConflict), error
    assert error.other == WINNER and error.aborted_by == "weir-operator" and error.bytes_written > 0
    assert error.file_groups == frozenset({("", "0000")})
    assert_rolled_back(t, job, files_before)


def test_a_write_aborted_from_outside_is_not_retried(tmp_path, monkeypatch):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                     options=WriterOptions(conflicts=ConflictOptions(retries=3, retry_backoff_s=0.01),
                                           abort_watch=AbortWatchOptions(check_s=60.0)))
    real = tx.commit_write
    attempts: list[str] = []

    def aborted_first(txn, *a, **kw):  # the operator decides while the write is about to commit
        attempts.append(txn.instant.requested_time)
        mark_aborted(txn.storage, txn.instant.requested_time, "weir-operator", now_ms(), DECISION)
        return real(txn, *a, **kw)

    monkeypatch.setattr("lakecore.table.writer.commit_write", aborted_first)
    with pytest.raises(EarlyConflict, match="aborted from outside by weir-operator"):
        t.upsert(batch([1, 2], 1))
    assert len(attempts) == 1 and [i.action for i in Table.open(t.uri).timeline().completed] == ["rollback"]


def _outcome(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except BaseException as exc:
        return exc


def test_the_registration_says_who_launched_the_writer():
    env = {"WEIR_WRITER": "lake/clicks", "WEIR_SUBMISSION_ID": "s-7", "WEIR_POD_NAME": "clicks-driver"}
    assert launch_info(env) == {"writer": "lake/clicks", "submission": "s-7", "pod": "clicks-driver"}
    assert set(launch_info({})) == {"pod"} and launch_info({})["pod"]  # the host name


# -- in ZooKeeper -----------------------------------------------------------------------------------


@pytest.fixture
def table_uri() -> str:
    return f"file:///tables/{uuid.uuid4().hex[:8]}"


@pytest.mark.zookeeper
def test_raising_a_flag_twice_is_fine_and_clearing_keeps_what_is_pending(zookeeper_server, table_uri):
    connect = zookeeper_server.connect_string
    base = f"/weir-tests/{uuid.uuid4().hex[:8]}"
    a, b = "20261123101600001", "20261123101600002"
    assert abort_flag_path(table_uri, base).startswith(f"{base}/tables-")
    assert raise_abort_flag(connect, table_uri, a, {**DECISION, "by": "weir-operator"}, base_path=base)
    assert not raise_abort_flag(connect, table_uri, a, {"by": "someone else"}, base_path=base)
    assert raise_abort_flag(connect, table_uri, b, DECISION, base_path=base)
    assert abort_flags(connect, table_uri, base_path=base) == [a, b]
    assert clear_abort_flags(connect, table_uri, keep={b}, base_path=base) == [a]
    assert abort_flags(connect, table_uri, base_path=base) == [b]
    assert clear_abort_flags(connect, "file:///never/flagged", keep=set(), base_path=base) == []


@pytest.mark.zookeeper
def test_a_flag_in_zookeeper_is_heard_at_once_and_a_closed_watch_hears_nothing(zookeeper_server, tmp_path):
    connect = zookeeper_server.connect_string
    base = f"/weir-tests/{uuid.uuid4().hex[:8]}"
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts")
    instant, early = "20261123101600003", "20261123101600004"
    raise_abort_flag(connect, t.uri, early, DECISION, base_path=base)  # raised before the writer watches
    heard: dict[str, list[dict]] = {instant: [], early: [], "closed": []}
    told = {k: threading.Event() for k in heard}

    def on(key):
        return lambda record: (heard[key].append(record), told[key].set())

    client = shared_clients.client(ZooKeeperLockConfig(connect, "aborts"))  # the one writers share
    listeners = len(client.state_listeners)
    # a storage check period no test waits for: only the ZooKeeper watch can explain hearing
    watches = [AbortWatch(t.storage, i, on(k), check_s=600, zookeeper=connect, base_path=base).start()
               for i, k in ((instant, instant), (early, early), (instant, "closed"))]
    watches[2].close()
    assert told[early].wait(30) and heard[early] == [DECISION]
    raise_abort_flag(connect, t.uri, instant, {**DECISION, "by": "weir-operator"}, base_path=base)
    assert told[instant].wait(30) and heard[instant] == [{**DECISION, "by": "weir-operator"}]
    assert not is_aborted(t.storage, instant)  # heard from the flag alone
    clear_abort_flags(connect, t.uri, keep=set(), base_path=base)  # a flag's deletion is no news
    raise_abort_flag(connect, t.uri, instant, DECISION, base_path=base)
    for watch in watches:
        watch.close()
    assert heard["closed"] == [] and len(heard[instant]) == 1
    assert len(client.state_listeners) == listeners  # closed watches leave nothing on the shared client
    assert instant_flag_path(t.uri, instant, base).startswith(abort_flag_path(t.uri, base))


def test_a_writer_that_cannot_reach_zookeeper_still_hears_from_storage(tmp_path, unused_port):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts")
    instant = "20261123101600005"
    told = threading.Event()
    heard: list[dict] = []
    with AbortWatch(t.storage, instant, lambda r: (heard.append(r), told.set()), check_s=0.05,
                    zookeeper=f"127.0.0.1:{unused_port}", timeout_s=0.5):  # starts anyway (logged)
        mark_aborted(t.storage, instant, "weir-operator", 1_763_806_500_123, DECISION)
        assert told.wait(30)
    assert heard == [read_aborted(t.storage, instant)]


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
