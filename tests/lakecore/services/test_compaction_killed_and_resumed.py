"""A compaction killed (SIGKILL) after its first base file is resumed by running it again, or
dropped by rolling it back; either way readers never see its partial output."""

import os
import signal
import subprocess
import sys

import pytest

from lakecore import State, Table
from lakecore.services import rollback_compaction, run_compaction, schedule_compaction
from lakecore.services.compaction import load_plan
from tests.lakecore.services.conftest import create, keys, log_counts, rows, snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _crashed_compaction(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(30)), 1))
    t.upsert(rows(list(range(0, 30, 3)), 2))
    t.delete(keys([4, 5], 9))
    before = snapshot(t)
    plan = schedule_compaction(t.storage, t.config, t.lock)
    assert plan is not None and len(plan.operations) == 2
    proc = subprocess.run([sys.executable, "-m", "tests.lakecore.services.compaction_crash", t.uri,
                           plan.instant_time], cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert t.timeline().get(plan.instant_time).state is State.INFLIGHT
    partial = [f.path for f in t.storage.list_dir("") if f.path.endswith(f"_{plan.instant_time}.parquet")]
    assert len(partial) == 1
    assert snapshot(t) == before   # the partial base file is invisible
    return t, plan, before, partial[0]


def _data_files(t):
    return sorted(f.path for f in t.storage.list_dir("") if not f.path.startswith(".weir"))


def test_rerunning_a_killed_compaction_completes_it(tmp_path):
    t, plan, before, _ = _crashed_compaction(tmp_path)
    again = Table.open(t.uri)
    resumed = load_plan(again.storage, plan.instant_time)
    done = run_compaction(again.storage, again.config, again.lock, resumed)
    assert done.is_completed and done.requested_time == plan.instant_time
    assert snapshot(again) == before and sum(log_counts(again)) == 0
    bases = {s.file_name for s in again.commit_metadata(done).write_stats}
    assert {p for p in _data_files(again) if plan.instant_time in p} == bases
    assert not again.storage.list_tree(f".weir/markers/{plan.instant_time}")
    assert run_compaction(again.storage, again.config, again.lock, plan) == done  # idempotent


def test_rolling_back_a_killed_compaction_deletes_its_files(tmp_path):
    t, plan, before, partial = _crashed_compaction(tmp_path)
    rollback_compaction(t.storage, t.lock, plan.instant_time)
    assert not t.storage.exists(partial)
    assert plan.instant_time not in [i.requested_time for i in t.timeline().instants]
    assert snapshot(t) == before and sum(log_counts(t)) > 0
    with pytest.raises(Exception, match="rolled back"):
        run_compaction(t.storage, t.config, t.lock, plan)
