"""Two runs of one table service never execute at once: a second compaction, clustering, clean or
archival while a live run executes gets ServiceRunning and changes nothing; only a run whose claim
died (released, heartbeat expired, process gone) is taken over; a run that stalled past its heartbeat
and was taken over cannot commit. Before run claims, the second run "resumed" the live run's instant,
deleted its files, and the first completed over missing files (FileNotFoundError on read)."""

from __future__ import annotations

import threading
import time

import pytest

import lakecore.services.compaction as compaction
from lakecore import AfterCommitOptions, Table, WriterOptions
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.concurrency.liveness.runs import ARCHIVAL, ServiceRun, live_run
from lakecore.errors import ServiceRunning
from lakecore.services import (
    ArchivalPolicy,
    CleanPolicy,
    ClusteringStrategy,
    rollback_compaction,
    run_clustering,
    run_compaction,
    schedule_clustering,
    schedule_compaction,
)
from lakecore.services.compaction import load_plan
from tests.lakecore.services.conftest import create, keys, rows, snapshot

FAST = HeartbeatConfig(interval_s=0.2, tolerable_misses=2)


def busy(tmp_path, options: WriterOptions | None = None) -> Table:
    quiet = WriterOptions(after_commit=AfterCommitOptions(archival=None))
    t = create(str(tmp_path / "t"), "event_time", options=options or quiet)
    t.upsert(rows(list(range(40)), 1))
    t.upsert(rows(list(range(0, 40, 3)), 2))
    t.delete(keys([5, 6], 9))
    return t


class Paused:
    """Pause a run inside its first task until released; tells when it got there."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> None:
        self.inside, self.go = threading.Event(), threading.Event()
        real = getattr(module, name)

        def hooked(*a: object, **kw: object) -> object:
            out = real(*a, **kw)
            if not self.inside.is_set():
                self.inside.set()
                assert self.go.wait(30), "the test never let the run go on"
            return out

        monkeypatch.setattr(module, name, hooked)


def in_thread(fn):
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["result"] = fn()
        except BaseException as exc:  # the test inspects it
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_a_second_compaction_run_is_refused_while_the_first_executes(tmp_path, monkeypatch):
    t = busy(tmp_path)
    before = snapshot(t)
    plan = schedule_compaction(t.storage, t.config, t.lock)
    paused = Paused(monkeypatch, compaction, "write_data_file")
    first, out = in_thread(lambda: run_compaction(t.storage, t.config, t.lock, plan, workers=1))
    assert paused.inside.wait(30)
    other = Table.open(t.uri)
    with pytest.raises(ServiceRunning, match=plan.instant_time):
        other.maintenance.compact(resume=True)
    with pytest.raises(ServiceRunning):  # dropping it while it runs is refused too
        rollback_compaction(other.storage, other.lock, plan.instant_time)
    paused.go.set()
    first.join(30)
    assert "error" not in out, out.get("error")
    fresh = Table.open(t.uri)
    assert snapshot(fresh) == before and not fresh.timeline().pending
    assert not t.storage.list_dir(f".weir/runs/{plan.instant_time}")  # its run records are gone


def test_a_second_clustering_run_is_refused_while_the_first_executes(tmp_path, monkeypatch):
    import lakecore.services.clustering as clustering

    t = busy(tmp_path)
    before = snapshot(t)
    plan = schedule_clustering(t.storage, t.config, t.lock, ClusteringStrategy("all", ("name",)))
    paused = Paused(monkeypatch, clustering, "write_data_file")
    first, out = in_thread(lambda: run_clustering(t.storage, t.config, t.lock, plan, workers=1))
    assert paused.inside.wait(30)
    with pytest.raises(ServiceRunning):
        Table.open(t.uri).maintenance.cluster(resume=True)
    paused.go.set()
    first.join(30)
    assert "error" not in out, out.get("error")
    assert snapshot(Table.open(t.uri)) == before


def test_a_run_that_stalled_past_its_heartbeat_is_taken_over_and_cannot_commit(tmp_path, monkeypatch):
    options = WriterOptions(heartbeat=FAST, after_commit=AfterCommitOptions(archival=None))
    t = busy(tmp_path, options)
    before = snapshot(t)
    plan = schedule_compaction(t.storage, t.config, t.lock)
    paused = Paused(monkeypatch, compaction, "write_data_file")
    first, out = in_thread(lambda: run_compaction(t.storage, t.config, t.lock, plan, workers=1,
                                                  heartbeat=FAST))
    assert paused.inside.wait(30)
    for thread in threading.enumerate():  # a stall: the stalled run's heartbeat beats no more
        if thread.name == f"weir-heartbeat-{plan.instant_time}":
            thread._target.__self__._wake.set()  # type: ignore[attr-defined]
            thread.join(5)
    time.sleep(FAST.timeout_ms / 1000 + 0.2)
    monkeypatch.undo()
    done = run_compaction(t.storage, t.config, t.lock, load_plan(t.storage, plan.instant_time),
                          heartbeat=FAST)
    assert done.is_completed
    paused.go.set()
    first.join(30)
    assert isinstance(out.get("error"), ServiceRunning), out  # it lost its claim: it must not commit
    fresh = Table.open(t.uri)
    assert snapshot(fresh) == before  # every file the view names exists and reads as before
    assert [i.requested_time for i in fresh.timeline().completed if i.action == "compaction"] == \
        [plan.instant_time]


def test_a_compaction_whose_process_died_is_resumed_at_once(tmp_path):
    """A claim from this host and PID namespace whose pid no longer exists is dead without waiting."""
    import subprocess
    import sys

    t = busy(tmp_path)
    before = snapshot(t)
    plan = schedule_compaction(t.storage, t.config, t.lock)
    child = ("import os, signal, sys\n"
             "from lakecore import Table\n"
             "from lakecore.services import start_compaction\n"
             "from lakecore.services.compaction import load_plan\n"
             "t = Table.open(sys.argv[1])\n"
             "start_compaction(t.storage, t.config, load_plan(t.storage, sys.argv[2]), t.lock)\n"
             "os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", child, t.uri, plan.instant_time], capture_output=True,
                          timeout=60)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert live_run(t.storage, plan.instant_time, int(time.time() * 1000), HeartbeatConfig()) is None
    # default 30 s heartbeat timeout: no waiting
    done = Table.open(t.uri).maintenance.compact(resume=True).instant
    assert done is not None and done.requested_time == plan.instant_time
    assert snapshot(Table.open(t.uri)) == before


def test_a_second_clean_and_a_second_archival_are_refused_while_one_runs(tmp_path, monkeypatch):
    import lakecore.services.clean as clean

    t = busy(tmp_path)
    t.maintenance.compact()
    t.upsert(rows([1, 2], 20))
    t.maintenance.compact()
    paused = Paused(monkeypatch, clean, "_delete_file")
    policy = CleanPolicy("keep_latest_file_versions", 1)
    first, out = in_thread(lambda: Table.open(t.uri).maintenance.clean(policy, dry_run=False).instant)
    assert paused.inside.wait(30)
    with pytest.raises(ServiceRunning, match="clean"):
        Table.open(t.uri).maintenance.clean(policy, dry_run=False)
    paused.go.set()
    first.join(30)
    assert "error" not in out and out["result"] is not None

    with t.lock:
        held = ServiceRun.claim(t.storage, t.lock, ARCHIVAL, "archival", HeartbeatConfig())
    with held, pytest.raises(ServiceRunning, match="archival"):
        Table.open(t.uri).maintenance.archive(ArchivalPolicy(1, 2))
    # released: runs now
    assert Table.open(t.uri).maintenance.archive(ArchivalPolicy(1, 2)).archived is not None


def test_tasks_of_a_claimed_run_pickle_without_the_claim(tmp_path):
    import pickle

    from lakecore.services import start_compaction

    t = busy(tmp_path)
    plan = schedule_compaction(t.storage, t.config, t.lock)
    run = start_compaction(t.storage, t.config, plan, t.lock)
    try:
        copy = pickle.loads(pickle.dumps(run))
        assert copy.run is None and copy.attempt == run.attempt and copy.inflight == run.inflight
        assert all(f"-{run.attempt}-" in token for token in run.tokens(3))
    finally:
        run.release()
    again = start_compaction(t.storage, t.config, plan, t.lock)
    assert again.attempt == run.attempt + 1  # attempts only grow
    again.release()


def test_a_restore_does_not_roll_back_a_running_compaction(tmp_path, monkeypatch):
    t = busy(tmp_path)
    sp = t.maintenance.savepoint(t.timeline().completed[0].requested_time).instant
    plan = schedule_compaction(t.storage, t.config, t.lock)
    paused = Paused(monkeypatch, compaction, "write_data_file")
    first, out = in_thread(lambda: run_compaction(t.storage, t.config, t.lock, plan, workers=1))
    assert paused.inside.wait(30)
    with pytest.raises(ServiceRunning):
        Table.open(t.uri).maintenance.restore(sp.requested_time, dry_run=False)
    paused.go.set()
    first.join(30)
    assert "error" not in out, out.get("error")
    assert Table.open(t.uri).maintenance.restore(sp.requested_time, dry_run=False).instant is not None
