"""A compacted base keeps deleted keys as tombstones, so a late, older event still loses to the delete."""

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
