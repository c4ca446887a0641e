"""A clustering killed (SIGKILL) in any phase — right after its requested instant, after its first
new base file, after all of them but before the commit, after the commit — is finished by running
it again or dropped by rolling it back; either way readers never see partial output and the table
reads exactly as before."""

import os
import signal
import subprocess
import sys

import pytest

from lakecore import State, Table
from lakecore.services import (
    ClusteringStrategy,
    load_clustering_plan,
    pending_clusterings,
    rollback_clustering,
    run_clustering,
    schedule_clustering,
)
from lakecore.timeline import TimelineStore
from tests.lakecore.services.conftest import create, file_counts, keys, rows, snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STRATEGY = ClusteringStrategy("all", ("name",))


def _crash(t: Table, phase: str, plan_instant: str = "") -> None:
    proc = subprocess.run([sys.executable, "-m", "tests.lakecore.services.clustering_crash", t.uri, phase,
                           plan_instant], cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()


def _files_of(t: Table, instant_time: str) -> list[str]:
    return sorted(f.path for f in t.storage.list_dir("") if f.path.endswith(f"_{instant_time}.parquet"))


def _crashed(tmp_path, phase: str, table_type: str = "merge_on_read"):
    t = create(str(tmp_path / "t"), "event_time", table_type=table_type)
    t.upsert(rows(list(range(30)), 1))
    t.upsert(rows(list(range(0, 30, 3)), 2))
    t.delete(keys([4, 5], 9))
    before = snapshot(t)
    if phase == "after_requested":
        _crash(t, phase)
        store = TimelineStore(t.storage)
        (pending,) = pending_clusterings(store, store.load())
        plan = load_clustering_plan(t.storage, pending.requested_time)
        assert pending.state is State.REQUESTED and not _files_of(t, plan.instant_time)
    else:
        plan = schedule_clustering(t.storage, t.config, t.lock, STRATEGY)
        assert plan is not None and len(plan.operations) == 2
        _crash(t, phase, plan.instant_time)
        state = t.timeline().get(plan.instant_time).state
        assert state is (State.COMPLETED if phase == "after_complete" else State.INFLIGHT)
        assert len(_files_of(t, plan.instant_time)) == (1 if phase == "mid_execute" else 2)
    if phase != "after_complete":
        assert snapshot(Table.open(t.uri)) == before   # the partial output is invisible
    return Table.open(t.uri), plan, before


PHASES = ["after_requested", "mid_execute", "before_complete"]


@pytest.mark.parametrize("phase", [*PHASES, "after_complete"])
def test_rerunning_a_killed_clustering_finishes_it(tmp_path, phase):
    t, plan, before = _crashed(tmp_path, phase)
    done = run_clustering(t.storage, t.config, t.lock, load_clustering_plan(t.storage, plan.instant_time))
    assert done.is_completed and done.requested_time == plan.instant_time and done.action == "replacecommit"
    assert snapshot(t) == before and file_counts(t) == [1, 1]
    assert _files_of(t, plan.instant_time) == sorted(s.path for s in t.commit_metadata(done).write_stats)
    assert not t.storage.list_tree(f".weir/markers/{plan.instant_time}")
    assert run_clustering(t.storage, t.config, t.lock, plan) == done   # idempotent


@pytest.mark.parametrize("phase", PHASES)
def test_rolling_back_a_killed_clustering_leaves_the_table_as_before(tmp_path, phase):
    t, plan, before = _crashed(tmp_path, phase)
    files_before = file_counts(t)
    rollback_clustering(t.storage, t.lock, plan.instant_time)
    assert not _files_of(t, plan.instant_time)
    assert plan.instant_time not in [i.requested_time for i in t.timeline().instants]
    assert snapshot(t) == before and file_counts(t) == files_before
    with pytest.raises(Exception, match="rolled back"):
        run_clustering(t.storage, t.config, t.lock, plan)


@pytest.mark.parametrize("resume", [True, False])
def test_a_copy_on_write_clustering_killed_mid_execute(tmp_path, resume):
    t, plan, before = _crashed(tmp_path, "mid_execute", "copy_on_write")
    if resume:
        run_clustering(t.storage, t.config, t.lock, plan)
    else:
        rollback_clustering(t.storage, t.lock, plan.instant_time)
    assert snapshot(t) == before and not t.timeline().pending
