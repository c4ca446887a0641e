"""A clean killed (SIGKILL) after deleting its first file is resumed by the next run and completes;
a clean first rolls back pending writes whose heartbeat expired (lazy cleanup)."""

import os
import signal
import subprocess
import sys
import time

from lakecore import State, Table
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.services import CleanPlan, CleanPolicy, run_clean
from tests.lakecore.services.conftest import HeldWrite, compact, create, rows, snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
POLICY = CleanPolicy("keep_latest_commits", 1)
FAST = HeartbeatConfig(interval_s=0.1, tolerable_misses=2)

# The child patches the delete step (the product code carries no test hooks) and dies after one file.
CHILD = """
import os, signal, sys
import lakecore.services.clean as clean
from lakecore import Table
from lakecore.services import CleanPolicy, run_clean
real = clean._delete_file
def once(storage, path):
    real(storage, path)
    os.kill(os.getpid(), signal.SIGKILL)
clean._delete_file = once
t = Table.open(sys.argv[1])
run_clean(t.storage, t.config, t.lock, CleanPolicy("keep_latest_commits", 1), dry_run=False)
"""


def _data_files(t):
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


def _history(t):
    t.upsert(rows(list(range(10)), 1))
    t.upsert(rows(list(range(5)), 2))
    compact(t)
    t.upsert(rows([1, 8], 3))


def test_a_killed_clean_is_resumed_and_completes(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    _history(t)
    before, files = snapshot(t), _data_files(t)
    plan = run_clean(t.storage, t.config, t.lock, POLICY)
    assert isinstance(plan, CleanPlan) and len(plan.files) == 4
    proc = subprocess.run([sys.executable, "-c", CHILD, t.uri], cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    pending = [i for i in t.timeline().instants if i.action == "clean"]
    assert len(pending) == 1 and pending[0].state is State.INFLIGHT
    assert len(files - _data_files(t)) == 1 and snapshot(t) == before
    resumed = run_clean(t.storage, t.config, t.lock, POLICY)  # dry run shows the pending clean's plan
    assert isinstance(resumed, CleanPlan) and resumed.instant_time == pending[0].requested_time
    assert set(resumed.files) == set(plan.files)

    again = Table.open(t.uri)
    done = run_clean(again.storage, again.config, again.lock, POLICY, dry_run=False)
    assert done is not None and not isinstance(done, CleanPlan)
    assert done.requested_time == pending[0].requested_time and done.is_completed
    assert _data_files(again) == files - set(plan.files)
    assert set(again.commit_metadata(done).extra["deleted"]) == set(plan.files)
    assert snapshot(again) == before
    assert run_clean(again.storage, again.config, again.lock, POLICY, dry_run=False) is None


def test_clean_rolls_back_expired_pending_writes_first(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    _history(t)
    before = snapshot(t)
    dead = HeldWrite(t, rows([2, 3, 50], 7))  # wrote its log files, never beats, never commits
    dead_files = {s.path for s in dead.stats}
    assert dead_files <= _data_files(t)
    time.sleep(FAST.timeout_ms / 1000 + 0.1)
    plan = run_clean(t.storage, t.config, t.lock, POLICY, heartbeat=FAST)
    assert isinstance(plan, CleanPlan) and plan.rollbacks == (dead.txn.instant.requested_time,)
    assert t.timeline().find(dead.txn.instant.requested_time) is not None  # dry run: still there

    done = run_clean(t.storage, t.config, t.lock, POLICY, dry_run=False, heartbeat=FAST)
    assert done is not None and not isinstance(done, CleanPlan)
    assert t.timeline().find(dead.txn.instant.requested_time) is None
    assert dead_files.isdisjoint(_data_files(t))
    assert t.commit_metadata(done).extra["rolled_back"] == [dead.txn.instant.requested_time]
    assert snapshot(t) == before


def test_a_live_pending_write_is_left_alone(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    _history(t)
    live = HeldWrite(t, rows([2, 60], 7))
    done = run_clean(t.storage, t.config, t.lock, POLICY, dry_run=False)  # default heartbeat: 30 s
    assert done is not None
    live.commit()
    assert {r["id"]: r["ts"] for r in snapshot(t)}[60] == 7
