"""Clustering beside writers under optimistic concurrency: merge-on-read log appends completed after
the plan join the new slice (no conflict, also with early detection); a copy-on-write write of the
same file group and the clustering never both commit — whichever commits second aborts with a typed
error naming both instants and the groups, and nothing is lost; disjoint file groups never conflict;
one clustering at a time; clean keeps what a pending clustering reads."""

import pytest

from lakecore import ConflictOptions, Table, WriterOptions
from lakecore.concurrency import commit_write, view_of
from lakecore.concurrency.conflicts.early import EarlyDetection, find_early_conflict
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.config import FILE_NAME
from lakecore.errors import ClusteringConflict, ClusteringPending, RollbackBlocked, WriteConflict
from lakecore.layout import parse_data_file_name
from lakecore.services import (
    CleanPolicy,
    ClusteringStrategy,
    rollback_clustering,
    run_clean,
    run_clustering,
    schedule_clustering,
)
from lakecore.services.clustering import execute_operation
from lakecore.write import list_markers
from tests.lakecore.services.conftest import (
    HeldBaseWrite,
    HeldWrite,
    cluster,
    compact,
    create,
    rows,
    snapshot,
)

ALL = ClusteringStrategy("all", ("name",))


def by_id(t: Table) -> dict:
    return {r["id"]: (r["ts"], r["name"]) for r in snapshot(t)}


@pytest.mark.parametrize("commit_before_run", [True, False])
def test_logs_written_beside_a_clustering_join_its_new_slice(tmp_path, commit_before_run):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(10)), 1))
    t.upsert(rows([1, 2], 2))
    held = HeldWrite(t, rows([1, 2, 3, 40], 3))       # in flight when the plan is made
    plan = schedule_clustering(t.storage, t.config, t.lock, ALL)
    assert plan is not None and len(plan.operations) == 2
    assert not {n for op in plan.operations for n in op.log_files} & {s.file_name for s in held.stats}
    if commit_before_run:
        held.commit()
        run_clustering(t.storage, t.config, t.lock, plan)
    else:
        run_clustering(t.storage, t.config, t.lock, plan)
        held.commit()
    got = by_id(t)
    assert sorted(got) == [*range(10), 40]
    assert got[1] == (3, "n1@3") and got[3] == (3, "n3@3") and got[4] == (1, "n4@1")   # no lost update
    slices = view_of(t.storage, t.timeline()).slices
    assert {s.base_instant for s in slices} == {plan.instant_time}
    late_logs = sorted(lf.stat.file_name for s in slices for lf in s.logs)
    assert late_logs == sorted(s.file_name for s in held.stats)


def test_writers_with_early_detection_never_abort_beside_a_clustering(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(20)), 1))
    t.upsert(rows(list(range(20)), 2))
    early = Table.open(t.uri, options=WriterOptions(conflicts=ConflictOptions(EarlyDetection("direct"))))
    before_plan = HeldWrite(t, rows(list(range(20)), 3))
    plan = schedule_clustering(t.storage, t.config, t.lock, ALL)
    assert plan is not None
    groups = {(s.partition, s.file_id) for s in before_plan.stats}
    try:
        before_plan.commit()                         # started before the plan, completes after it
        execute_operation(t.storage, t.config, plan.instant_time, plan.operations[0], plan.strategy)
        assert list_markers(t.storage, plan.instant_time)   # the clustering holds a marker there
        early.upsert(rows(list(range(5)), 4))        # while the clustering is pending
        late = HeldWrite(t, rows([6], 5))             # in flight while the clustering completes
        run_clustering(t.storage, t.config, t.lock, plan)
        assert find_early_conflict(t.storage, late.txn.instant, groups, HeartbeatConfig(),
                                   check_commits=True) is None
        late.commit()
        early.upsert(rows(list(range(3)), 6))        # after the clustering completed
    except WriteConflict as exc:  # pragma: no cover - the assertion is that this never happens
        pytest.fail(f"a clustering made a log writer abort: {exc}")
    assert {k: ts for k, (ts, _) in by_id(t).items()} == \
        {**dict.fromkeys(range(20), 3), **dict.fromkeys(range(5), 4), 6: 5, **dict.fromkeys(range(3), 6)}


def _cow(tmp_path) -> Table:
    t = create(str(tmp_path / "t"), "event_time", table_type="copy_on_write")
    t.upsert(rows(list(range(10)), 1))
    t.upsert(rows([1, 2, 3], 2))
    return t


def test_a_copy_on_write_commit_after_the_plan_aborts_the_clustering(tmp_path):
    t = _cow(tmp_path)
    writer = HeldBaseWrite(t, rows([1, 4, 50], 5))    # started before the plan
    plan = schedule_clustering(t.storage, t.config, t.lock, ALL)
    assert plan is not None
    done = writer.commit()                            # completes after the plan: wrote new bases
    expected = by_id(t)
    assert expected[1] == (5, "n1@5") and expected[50] == (5, "n50@5")
    with pytest.raises(ClusteringConflict) as info:
        run_clustering(t.storage, t.config, t.lock, plan)
    err = info.value
    assert err.instant == plan.instant_time and plan.instant_time in str(err)
    assert done.requested_time in str(err) and "rolled back" in str(err)
    written = {(s.partition, s.file_id) for s in writer.stats}
    assert {c.theirs for c in err.conflicts} == {done.requested_time}
    assert frozenset().union(*(c.file_groups for c in err.conflicts)) == written & plan.file_groups
    assert by_id(t) == expected                       # nothing lost: the writer's data stands
    assert plan.instant_time not in [i.requested_time for i in t.timeline().instants]
    assert not [f for f in t.storage.list_dir("") if plan.instant_time in f.path]
    assert cluster(t, ALL) is not None and by_id(t) == expected   # a new clustering sees the new bases


@pytest.mark.parametrize("started", ["before_plan", "after_plan"])
def test_a_copy_on_write_commit_after_the_clustering_aborts_the_writer(tmp_path, started):
    t = _cow(tmp_path)
    data = rows([1, 4, 50], 5)
    writer = HeldBaseWrite(t, data) if started == "before_plan" else None
    plan = schedule_clustering(t.storage, t.config, t.lock, ALL)
    assert plan is not None
    writer = writer or HeldBaseWrite(t, data)
    clustered_at = run_clustering(t.storage, t.config, t.lock, plan)
    clustered = by_id(t)
    with pytest.raises(WriteConflict) as info:
        writer.commit()
    assert plan.instant_time in str(info.value)
    assert {c.theirs for c in info.value.conflicts} == {clustered_at.requested_time}
    assert by_id(t) == clustered                      # the aborted write left nothing behind
    t.upsert(data)                                    # its retry merges over the clustered bases
    got = by_id(t)
    assert got[1] == (5, "n1@5") and got[4] == (5, "n4@5") and got[50] == (5, "n50@5")
    assert got[2] == (2, "n2@2") and len(got) == 11


def test_disjoint_file_groups_never_conflict(tmp_path):
    t = _cow(tmp_path)
    plan = schedule_clustering(t.storage, t.config, t.lock, ClusteringStrategy("all", max_groups=1))
    assert plan is not None and len(plan.operations) == 1
    (clustered_group,) = plan.file_groups
    meta = t.read(with_meta=True)
    other = [r["id"] for r in meta.to_pylist()
             if parse_data_file_name(r[FILE_NAME]).file_id != clustered_group[1]]
    assert other
    before_run = HeldBaseWrite(t, rows(other[:2], 7))
    before_run.commit()                               # a base writer of the OTHER group, after the plan
    run_clustering(t.storage, t.config, t.lock, plan)
    after_run = HeldBaseWrite(t, rows(other[2:4], 8))
    commit_write(after_run.txn, after_run.stats, lock=t.lock)
    got = by_id(t)
    assert all(got[k][0] == 7 for k in other[:2]) and all(got[k][0] == 8 for k in other[2:4])


def test_one_clustering_at_a_time_and_rollback_frees_the_table(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows([1, 2, 3], 1))
    plan = schedule_clustering(t.storage, t.config, t.lock, ALL)
    assert plan is not None
    with pytest.raises(ClusteringPending, match=plan.instant_time):
        schedule_clustering(t.storage, t.config, t.lock, ALL)
    with pytest.raises(RollbackBlocked, match="rollback_clustering"):
        # clustering would resurrect it
        t.maintenance.rollback(t.timeline().completed[-1].requested_time, dry_run=False)
    rollback_clustering(t.storage, t.lock, plan.instant_time)
    assert not t.timeline().pending
    with pytest.raises(Exception, match="rolled back"):
        run_clustering(t.storage, t.config, t.lock, plan)
    assert cluster(t, ALL) is not None and [r["id"] for r in snapshot(t)] == [1, 2, 3]


def test_clean_keeps_the_files_a_pending_clustering_reads(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(10)), 1))
    t.upsert(rows([1, 2], 2))
    expected = by_id(t)
    plan = schedule_clustering(t.storage, t.config, t.lock, ALL)
    assert plan is not None
    compact(t)     # a compaction beside it supersedes the planned slices
    run_clean(t.storage, t.config, t.lock, CleanPolicy("keep_latest_file_versions", 1), dry_run=False)
    planned = [p for op in plan.operations for p in op.paths()]
    assert all(t.storage.exists(p) for p in planned)
    run_clustering(t.storage, t.config, t.lock, plan)
    assert by_id(t) == expected
