"""A compacted base keeps deleted keys as tombstones, so a late, older event still loses to the delete;
with a tombstone retention, rewrites drop tombstones older than it (and only those)."""

import pyarrow as pa

from lakecore.layout.buckets import table_bucket_of
from tests.lakecore.services.conftest import compact, create, keys, rows, snapshot


def test_an_older_late_event_after_compaction_still_loses_to_a_delete(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows([1, 2, 3], 5))
    t.delete(keys([1, 2], 10))
    done = compact(t)
    assert done is not None
    stats = t.commit_metadata(done).write_stats
    assert sum(s.deletes for s in stats) == 2 and sum(s.records for s in stats) == 1
    t.upsert(rows([1, 2], [7, 11]))   # 1 is older than its delete; 2 is newer
    assert [(r["id"], r["ts"]) for r in snapshot(t)] == [(2, 11), (3, 5)]
    compact(t)
    t.upsert(rows([1], 9))
    assert [(r["id"], r["ts"]) for r in snapshot(t)] == [(2, 11), (3, 5)]


def test_a_key_deleted_before_compaction_stays_deleted(tmp_path):
    t = create(str(tmp_path / "t"), "commit_time")
    t.upsert(rows([1, 2], 1))
    t.delete(keys([1]))
    compact(t)
    assert [r["id"] for r in snapshot(t)] == [2]
    t.upsert(rows([1], 0))   # commit time: a later write re-creates the key
    assert [r["id"] for r in snapshot(t)] == [1, 2]


def _far_future(days: int):
    from lakecore.timeline import now_ms

    return lambda: now_ms() + days * 86_400_000


def test_tombstones_older_than_the_retention_are_purged_by_compaction_and_clustering(tmp_path):
    from lakecore.services import ClusteringStrategy, run_compaction, schedule_compaction

    t = create(str(tmp_path / "t"), "event_time", tombstone_retention_hours=24)
    # keys 2 and 4 share a file group, key 1 has the other one
    groups = table_bucket_of([pa.array([1, 2, 4], pa.int64())], 2, str(t.config.bucket_hash)).tolist()
    assert groups[1] == groups[2] != groups[0]
    t.upsert(rows([1, 2, 4], 5))
    t.delete(keys([1], 10))
    fresh = compact(t)  # the delete is seconds old: within 24 h, its tombstone stays
    assert sum(s.deletes for s in t.commit_metadata(fresh).write_stats) == 1
    t.delete(keys([2], 10))
    # a compaction planned two days later rewrites key 2's file group (it has a log): the delete is past
    # the retention there; key 1's group has no log, is not rewritten, and keeps its tombstone
    plan = schedule_compaction(t.storage, t.config, t.lock, clock=_far_future(2))
    late = run_compaction(t.storage, t.config, t.lock, plan)
    stats = t.commit_metadata(late).write_stats
    assert [s.deletes for s in stats] == [0] and sum(s.records for s in stats) == 1
    assert [r["id"] for r in snapshot(t)] == [4]
    t.upsert(rows([1, 2], 7))  # both older than their deletes: only the purged one comes back
    assert [(r["id"], r["ts"]) for r in snapshot(t)] == [(2, 7), (4, 5)]
    t.delete(keys([4], 20))
    done = t.maintenance.cluster(ClusteringStrategy("all")).instant
    assert done is not None and sum(s.deletes for s in t.commit_metadata(done).write_stats) == 1  # young


def test_copy_on_write_rewrites_purge_expired_tombstones_and_the_default_keeps_them(tmp_path):
    import pyarrow.parquet as pq

    from lakecore.concurrency import begin_write, commit_write
    from lakecore.write import conform, route, write_file_group

    for retention, kept in ((0, 0), (None, 1)):
        t = create(str(tmp_path / f"t{retention}"), "event_time", table_type="copy_on_write",
                   tombstone_retention_hours=retention)
        t.upsert(rows([1, 2], 5))
        t.delete(keys([1], 10))  # this rewrite itself is the delete's instant: not older than it
        data = rows([1], 6)  # the same file group; older than the delete, so it loses either way
        txn = begin_write(t.storage, t.config, t.lock, "upsert", need_view=True, clock=_far_future(1))
        stats = [s for g in route(conform(data, t.config, "upsert").rows, t.config)
                 for s in write_file_group(txn.context(), g)]
        done = commit_write(txn, stats, lock=t.lock)
        written = t.commit_metadata(done).write_stats
        ops = pq.read_table(f"{t.uri}/{written[0].path}").column("_weir_op").to_pylist()
        assert ops.count(1) == kept, retention  # tombstones in the rewritten base file
        assert [(r["id"], r["ts"]) for r in snapshot(t)] == [(2, 5)]


def test_a_bad_retention_is_refused():
    import pyarrow as pa
    import pytest

    from lakecore import Table
    from lakecore.errors import InvalidTableConfig

    with pytest.raises(InvalidTableConfig, match="tombstone_retention_hours"):
        Table.create("memory://weir-tests/bad-retention", schema=pa.schema([("id", pa.int64())]),
                     record_key="id", tombstone_retention_hours=-1)
