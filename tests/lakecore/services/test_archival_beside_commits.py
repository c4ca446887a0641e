"""Archival writes its history files without the table lock, so writers commit beside it; it
commits only if nothing changed what it archived (another archival, a savepoint), and otherwise
deletes what it wrote and leaves the table exactly as the other party left it."""

from __future__ import annotations

import threading
import time

import pytest

from lakecore import Table
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.errors import ServiceRunning
from lakecore.services import ArchivalPolicy
from lakecore.table import AfterCommitOptions, WriterOptions
from lakecore.timeline.history import HISTORY_DIR, Manifest
from lakecore.timeline.history_store import HistoryStore, manifest_path
from tests.lakecore.services.conftest import create, rows, snapshot

POLICY = ArchivalPolicy(3, 5, 3)
QUIET = WriterOptions(after_commit=AfterCommitOptions(archival=None))


@pytest.fixture
def table(tmp_path):
    t = create(str(tmp_path / "t"), "event_time", options=QUIET)
    for k in range(8):
        t.upsert(rows([k % 4, 10 + k], k))
    return t


def while_history_is_written(monkeypatch, action):
    """Run `action` in another thread once the archival has written its level-0 file; it must finish
    while the archival is still between writing and committing."""
    real = HistoryStore.write_rows
    done: list[object] = []
    started: list[bool] = []

    def hooked(self, level, rows_):
        out = real(self, level, rows_)
        if not started:  # only the first archival's first file (the other party may archive too)
            started.append(True)
            worker = threading.Thread(target=lambda: done.append(action()))
            worker.start()
            worker.join(timeout=20)
            assert not worker.is_alive(), "the other party waited for the archival's lock"
        return out

    monkeypatch.setattr(HistoryStore, "write_rows", hooked)
    return done


def every_instant(t: Table) -> list[str]:
    fresh = Table.open(t.uri)
    return sorted(i.requested_time for i in (*fresh.archived_instants(), *fresh.timeline().completed))


def history_files_are_exactly_the_manifests(t: Table) -> None:
    store = HistoryStore(t.storage)
    current = store.current_version()
    named = set()
    for v in range(max(1, current - 1), current + 1):
        m = Manifest.loads(t.storage.read(manifest_path(v)), source="test")
        named |= {f.name for f in m.files} | {m.live, manifest_path(v).rsplit("/", 1)[1]}
    assert set(t.storage.list_names(HISTORY_DIR)) <= named


def test_a_writer_commits_while_the_archival_writes_history(table, monkeypatch):
    other = Table.open(table.uri, options=QUIET)
    before = every_instant(table)
    done = while_history_is_written(monkeypatch, lambda: other.upsert(rows([1, 99], 100)).instant)
    result = table.maintenance.archive(POLICY).archived
    assert done, "the writer did not commit during the archival"
    assert result is not None and result.archived == 8 - POLICY.min_instants
    assert every_instant(table) == sorted([*before, done[0].requested_time])
    assert {r["id"]: r["ts"] for r in snapshot(Table.open(table.uri))}[1] == 100
    history_files_are_exactly_the_manifests(table)


def test_a_second_archival_is_refused_while_one_runs(table, monkeypatch):
    other = Table.open(table.uri)
    refused: list[BaseException] = []

    def second() -> None:
        with pytest.raises(ServiceRunning) as info:
            other.maintenance.archive(POLICY)
        refused.append(info.value)

    while_history_is_written(monkeypatch, second)
    result = table.maintenance.archive(POLICY).archived
    assert refused, "two archivals ran at once"
    assert result is not None and result.archived == 8 - POLICY.min_instants
    history_files_are_exactly_the_manifests(table)


def test_an_archival_that_lost_its_claim_discards_its_files(table, monkeypatch):
    """The first archival stalls past its heartbeat timeout while writing history; a second one
    takes over and commits; the first must then discard what it wrote, not commit over it."""
    before, state = every_instant(table), snapshot(table)
    fast = WriterOptions(heartbeat=HeartbeatConfig(interval_s=0.25, tolerable_misses=2),
                         after_commit=AfterCommitOptions(archival=None))
    stalled = Table.open(table.uri, options=fast)
    other = Table.open(table.uri, options=fast)
    real = HistoryStore.write_rows
    done: list[object] = []

    def hooked(self, level, rows_):
        out = real(self, level, rows_)
        if not done:
            done.append(None)
            for thread in threading.enumerate():  # the stalled run's heartbeat stops, as in a long GC pause
                if thread.name.startswith("weir-heartbeat-archival"):
                    thread_stop(thread)
            time.sleep(0.6)  # past its heartbeat timeout
            done[0] = other.maintenance.archive(POLICY).archived
        return out

    monkeypatch.setattr(HistoryStore, "write_rows", hooked)
    assert stalled.maintenance.archive(POLICY).archived is None
    assert done and done[0] is not None  # the other archival committed
    fresh = Table.open(table.uri)
    assert fresh.timeline().archived.count == 8 - POLICY.min_instants
    assert every_instant(table) == before and snapshot(fresh) == state
    history_files_are_exactly_the_manifests(table)


def thread_stop(thread: threading.Thread) -> None:
    """Stop a Heartbeat's thread the way a stall would: no beat after this (the Heartbeat object is
    reachable through the thread's target)."""
    heartbeat = thread._target.__self__  # type: ignore[attr-defined]
    heartbeat._wake.set()
    thread.join(timeout=5)


def test_a_savepoint_taken_meanwhile_stops_the_archival(table, monkeypatch):
    pinned = table.timeline().completed[1].requested_time
    other = Table.open(table.uri)
    done = while_history_is_written(monkeypatch, lambda: other.maintenance.savepoint(pinned).instant)
    assert table.maintenance.archive(POLICY).archived is None
    assert done
    fresh = Table.open(table.uri)
    assert fresh.timeline().archived.count == 0
    assert fresh.storage.list_names(HISTORY_DIR) == []
    monkeypatch.undo()
    result = fresh.maintenance.archive(POLICY).archived  # the next archival stops at the savepoint
    assert result is not None and result.archived == 1


def test_a_writer_finds_a_running_archival_without_waiting_on_the_lock(table, monkeypatch):
    """Writers archive inline after their commits: while one archives, the others learn it from its
    live claim, before taking the table lock every writer waits on."""
    from lakecore.concurrency.liveness.runs import ServiceRun
    from lakecore.services.archive import ARCHIVAL, DEFAULT_HEARTBEAT, run_archival

    with table.lock:
        running = ServiceRun.claim(table.storage, table.lock, ARCHIVAL, "archival", DEFAULT_HEARTBEAT)
    taken: list[bool] = []
    real_acquire = table.lock.acquire
    monkeypatch.setattr(table.lock, "acquire",
                        lambda timeout=None: (taken.append(True), real_acquire(timeout)))
    try:
        with pytest.raises(ServiceRunning, match="archival is already running"):
            run_archival(table.storage, table.lock, POLICY)
        assert taken == []
    finally:
        running.release()
    monkeypatch.undo()
    assert run_archival(table.storage, table.lock, POLICY) is not None  # free again: it archives
