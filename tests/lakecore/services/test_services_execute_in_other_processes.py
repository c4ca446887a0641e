"""Compaction and clustering split as the Spark jobs will run them: the driver starts the run, each
plan operation executes in another process (spawned: nothing shared but pickled arguments), the
driver commits the returned write stats. Reads are unchanged and the new files are the ones named."""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from lakecore.services import (
    ClusteringStrategy,
    Running,
    commit_clustering,
    commit_compaction,
    schedule_clustering,
    schedule_compaction,
    start_clustering,
    start_compaction,
)
from lakecore.services import clustering as clustering_service
from lakecore.services import compaction as compaction_service
from tests.lakecore.services.conftest import create, keys, rows, snapshot


def _data_files(t):
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


def test_compaction_and_clustering_execute_in_worker_processes(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(40)), 1))
    t.upsert(rows(list(range(0, 40, 3)), 2))
    t.delete(keys([5, 6], 9))
    before = snapshot(t)
    spawn = multiprocessing.get_context("spawn")

    plan = schedule_compaction(t.storage, t.config, t.lock)
    assert plan is not None and len(plan.operations) == 2
    run = start_compaction(t.storage, t.config, plan, t.lock)
    assert isinstance(run, Running)
    tokens = run.tokens(len(plan.operations))
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        stats = list(pool.map(compaction_service.execute_operation, [t.storage] * 2, [run.config] * 2,
                              [plan.instant_time] * 2, plan.operations, tokens))
    done = commit_compaction(t.storage, t.lock, plan, run, stats)
    assert done.is_completed and snapshot(t) == before
    assert {s.path for s in stats} <= _data_files(t)

    c_plan = schedule_clustering(t.storage, t.config, t.lock, ClusteringStrategy("all", ("name",)))
    assert c_plan is not None
    c_run = start_clustering(t.storage, t.config, c_plan, t.lock)
    assert isinstance(c_run, Running)
    n = len(c_plan.operations)
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        c_stats = list(pool.map(clustering_service.execute_operation, [t.storage] * n, [c_run.config] * n,
                                [c_plan.instant_time] * n, c_plan.operations, [c_plan.strategy] * n,
                                c_run.tokens(n)))
    c_done = commit_clustering(t.storage, t.lock, c_plan, c_run, c_stats)
    assert c_done.action == "replacecommit" and snapshot(t) == before
    # a second start of a completed run just answers the completed instant
    assert start_compaction(t.storage, t.config, plan, t.lock) == done
