"""Table services run by Spark: tasks execute the plan's operations, the driver commits; the table
reads the same before and after; a run a dead job left pending is resumed by the next one."""

from __future__ import annotations

import time

import pyarrow.parquet as pq
import pytest

from lakecore import Table, WriterOptions
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.errors import ServiceRunning
from lakecore.layout import build_view
from lakecore.services import ClusteringStrategy, schedule_compaction, start_compaction
from lakecore.services import compaction as compaction_service
from lakecore.timeline import TimelineStore
from tests.lakecore.services.conftest import create, keys, rows, snapshot

pytestmark = pytest.mark.spark


def busy_table(tmp_path) -> Table:
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(60)), 1))
    t.upsert(rows(list(range(0, 60, 4)), 2))
    t.delete(keys([3, 7], 9))
    t.upsert(rows([7, 100], 10))
    return t


def data_files(t: Table) -> set[str]:
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


def view_files(t: Table) -> set[str]:
    fresh = Table.open(t.uri)
    view = build_view(fresh.timeline(), TimelineStore(fresh.storage).metadata)
    return {f.path for s in view.as_dict().values() for f in s.files}


def test_compaction_runs_its_operations_as_spark_tasks(spark, tmp_path):
    from sparkjobs.services import compact

    t = busy_table(tmp_path)
    before = snapshot(t)
    out = compact(spark, t)
    assert out.instant is not None and out.operations == 2 and not out.resumed
    fresh = Table.open(t.uri)
    assert snapshot(fresh) == before
    assert all(s.base is not None and not s.logs for s in build_view(
        fresh.timeline(), TimelineStore(fresh.storage).metadata).as_dict().values())
    assert compact(spark, fresh).instant is None  # nothing left to compact


def test_clustering_runs_on_spark_and_sorts(spark, tmp_path):
    from sparkjobs.services import cluster

    t = busy_table(tmp_path)
    before = snapshot(t)
    out = cluster(spark, t, ClusteringStrategy("all", ("name",)))
    assert out.instant is not None and out.operations == 2
    fresh = Table.open(t.uri)
    assert snapshot(fresh) == before
    fs, root = fresh.storage.arrow()
    for s in build_view(fresh.timeline(), TimelineStore(fresh.storage).metadata).as_dict().values():
        names = pq.read_table(f"{root}/{s.base.path}", filesystem=fs, columns=["name"]).column("name")
        values = names.to_pylist()  # sorted by name, nulls (tombstones) last
        present = [v for v in values if v is not None]
        assert values == present + [None] * (len(values) - len(present)) and present == sorted(present)


def test_a_compaction_a_dead_job_left_is_resumed(spark, tmp_path):
    from sparkjobs.services import compact

    t = busy_table(tmp_path)
    before = snapshot(t)
    fast = HeartbeatConfig(interval_s=0.05, tolerable_misses=2)
    t = Table.open(t.uri, options=WriterOptions(heartbeat=fast))
    plan = schedule_compaction(t.storage, t.config, t.lock)
    run = start_compaction(t.storage, t.config, plan, t.lock, heartbeat=fast)
    first = plan.operations[0]
    compaction_service.execute_operation(t.storage, run.config, plan.instant_time, first, "0-0-0")
    # the job died here: one new base file written, the compaction inflight, its claim beating no more
    assert run.run is not None
    run.run.heartbeat.stop(delete=False)
    with pytest.raises(ServiceRunning):  # until its heartbeat expires, it might still be alive
        compact(spark, Table.open(t.uri, options=WriterOptions(heartbeat=HeartbeatConfig(60.0))))
    time.sleep(fast.timeout_ms / 1000 + 0.05)
    out = compact(spark, t)
    assert out.resumed and out.instant == plan.instant_time
    fresh = Table.open(t.uri)
    assert snapshot(fresh) == before and not fresh.timeline().pending
    assert view_files(fresh) <= data_files(fresh)
    written = {f for f in data_files(fresh) if plan.instant_time in f}
    assert written <= view_files(fresh), "a file of the dead attempt was left behind"


def test_clean_and_archival_run_on_the_driver(spark, tmp_path):
    from lakecore.services import ArchivalPolicy, CleanPolicy
    from sparkjobs.services import archive, clean, compact

    t = busy_table(tmp_path)
    for k in range(8):
        t.upsert(rows([k], 20 + k))
    compact(spark, t)
    before = snapshot(t)
    assert clean(t, CleanPolicy("keep_latest_file_versions", 1)).instant is not None
    out = archive(t, ArchivalPolicy(3, 5, 3))
    assert out.detail is not None and out.detail["archived"] > 0
    assert snapshot(Table.open(t.uri)) == before
