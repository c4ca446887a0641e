"""Rolling back a completed write brings back the snapshot without it; it works for an older write
only followed by log files, and is refused for a compacted or rewritten one, a table service that is
not the latest write, a savepointed one, and while a writer is live. A compaction followed only by
log files of later writes can be rolled back too (they join the slice it merged): the table reads
the same, so a damaged compaction output is repaired without losing the later writes' rows."""

import pytest

from lakecore.errors import RollbackBlocked, WriterLive
from lakecore.services import (
    CleanPolicy,
    create_savepoint,
    delete_savepoint,
    rollback_completed,
    schedule_compaction,
)
from tests.lakecore.services.conftest import HeldWrite, compact, create, rows, snapshot


def _data_files(t):
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_rolling_back_the_latest_write_restores_the_previous_snapshot(tmp_path, table_type):
    t = create(str(tmp_path / "t"), "event_time", table_type=table_type)
    t.upsert(rows(list(range(10)), 1))
    t.upsert(rows(list(range(5)), 2))
    before, files = snapshot(t), _data_files(t)
    last = t.upsert(rows([1, 2, 40], 3)).instant
    written = {s.path for s in t.commit_metadata(last).write_stats}
    rb = rollback_completed(t.storage, t.config, t.lock, last.requested_time)
    assert rb.action == "rollback" and rb.is_completed
    assert t.timeline().find(last.requested_time) is None
    assert t.commit_metadata(rb).extra["undone"] == [last.file_name]
    assert snapshot(t) == before and _data_files(t) == files and not written & _data_files(t)
    assert rollback_completed(t.storage, t.config, t.lock, last.requested_time) == rb  # idempotent
    t.upsert(rows([3], 4))
    assert len(snapshot(t)) == 10


def test_an_older_uncompacted_write_can_be_undone_a_compacted_or_rewritten_one_cannot(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    first = t.upsert(rows(list(range(10)), 1)).instant.requested_time
    second = t.upsert(rows([1, 2], 2)).instant.requested_time
    third = t.upsert(rows([2, 3], 3)).instant.requested_time
    # the second write is not the latest, but only log files came after it: undo it alone
    rollback_completed(t.storage, t.config, t.lock, second)
    expected = {r["id"]: r["ts"] for r in snapshot(t)}
    assert expected == {**{i: 1 for i in range(10)}, 2: 3, 3: 3}
    c = compact(t)
    assert c is not None
    with pytest.raises(RollbackBlocked, match=f"compaction {c.requested_time} compacted its file group"):
        rollback_completed(t.storage, t.config, t.lock, first)
    fourth = t.upsert(rows([1], 5)).instant.requested_time
    plan = schedule_compaction(t.storage, t.config, t.lock)
    assert plan is not None
    with pytest.raises(RollbackBlocked, match=f"compaction {plan.instant_time} is pending"):
        rollback_completed(t.storage, t.config, t.lock, fourth)
    assert third


def test_copy_on_write_a_later_rewrite_of_the_same_file_group_blocks_it(tmp_path):
    t = create(str(tmp_path / "t"), "event_time", table_type="copy_on_write")
    t.upsert(rows(list(range(10)), 1))
    middle = t.upsert(rows([1], 2)).instant
    later = t.upsert(rows([1], 3)).instant  # the same key: the same file group, rewritten
    with pytest.raises(RollbackBlocked, match=f"commit {later.requested_time} rewrote its file group"):
        rollback_completed(t.storage, t.config, t.lock, middle.requested_time)


def test_a_savepointed_write_or_a_live_writer_blocks_it(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(10)), 1))
    last = t.upsert(rows(list(range(5)), 2)).instant.requested_time
    sp = create_savepoint(t.storage, t.lock, last)
    with pytest.raises(RollbackBlocked,
                       match=f"savepoint {sp.requested_time} keeps the table as of {last}, which {last}"):
        rollback_completed(t.storage, t.config, t.lock, last)
    delete_savepoint(t.storage, t.lock, sp.requested_time)
    live = HeldWrite(t, rows([5], 3))
    before = snapshot(t)
    with pytest.raises(WriterLive, match=live.txn.instant.requested_time):
        rollback_completed(t.storage, t.config, t.lock, last)
    assert snapshot(t) == before
    t.maintenance.rollback(live.txn.instant.requested_time, dry_run=False, force=True)
    rollback_completed(t.storage, t.config, t.lock, last)
    assert len(snapshot(t)) == 10


def test_a_clean_that_deleted_the_previous_files_blocks_it(tmp_path):
    t = create(str(tmp_path / "t"), "event_time", table_type="copy_on_write")
    t.upsert(rows(list(range(10)), 1))
    last = t.upsert(rows(list(range(10)), 2)).instant.requested_time
    assert t.maintenance.clean(CleanPolicy("keep_latest_file_versions", 1), dry_run=False).instant is not None
    with pytest.raises(RollbackBlocked, match=r"clean \d+ deleted .* restore to a savepoint instead"):
        rollback_completed(t.storage, t.config, t.lock, last)


@pytest.mark.parametrize("mode", ["event_time", "commit_time"])
def test_a_compaction_followed_by_log_files_rolls_back_and_the_table_reads_the_same(tmp_path, mode):
    t = create(str(tmp_path / "t"), mode)
    batch = rows
    t.upsert(batch(list(range(20)), 1))
    t.upsert(batch(list(range(10, 30)), 2))
    t.delete(rows([3, 4], 2).select(["id"]))
    c = compact(t)
    assert c is not None
    t.upsert(batch([1, 2, 11, 40, 41], 3))   # later writes: log files of the compacted groups only
    t.delete(rows([5, 12], 4).select(["id"]))
    later = [i.requested_time for i in t.timeline().completed if i.completion_time > c.completion_time]
    before = {"latest": snapshot(t), **{i: snapshot(t, as_of=i) for i in later}}
    written = {s.path for s in t.commit_metadata(c).write_stats}
    rb = rollback_completed(t.storage, t.config, t.lock, c.requested_time)
    assert rb.is_completed and t.timeline().find(c.requested_time) is None
    assert not written & _data_files(t)
    assert {"latest": snapshot(t), **{i: snapshot(t, as_of=i) for i in later}} == before
    assert compact(t) is not None and snapshot(t) == before["latest"]   # and compacts again the same


def test_a_compaction_with_a_later_service_or_base_file_still_refuses(tmp_path):
    from lakecore.services import ClusteringStrategy

    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(20)), 1))
    t.upsert(rows(list(range(5)), 2))
    c = compact(t)
    t.upsert(rows([1], 3))
    c2 = compact(t)
    assert c is not None and c2 is not None
    with pytest.raises(RollbackBlocked, match=f"compaction {c2.requested_time} completed after compaction "
                       f"{c.requested_time}; a table service instant can be rolled back only"):
        rollback_completed(t.storage, t.config, t.lock, c.requested_time)
    # a clustering followed by a data write: rolling that write back first drops what it wrote
    t.maintenance.cluster(ClusteringStrategy("all", ("id",)))
    clustered = t.timeline().completed[-1]
    t.upsert(rows([2], 4))
    with pytest.raises(RollbackBlocked, match=r"table service instant can be rolled back only .* roll back "
                       r"(\d+) first \(which drops what \1 wrote: write its input again after\)"):
        rollback_completed(t.storage, t.config, t.lock, clustered.requested_time)


def test_a_pending_clean_after_a_compaction_blocks_its_rollback(tmp_path):
    """A clean planned after the compaction deletes the files it merged, which the table needs
    without it: while that clean is pending (killed after it was planned), the rollback waits."""
    from dataclasses import replace

    from lakecore.services import run_clean
    from lakecore.timeline import Instant, TimelineStore, next_instant_time, now_ms

    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(10)), 1))
    t.upsert(rows(list(range(5)), 2))
    c = compact(t)
    t.upsert(rows([1, 8], 3))
    plan = run_clean(t.storage, t.config, t.lock, CleanPolicy("keep_latest_commits", 1))
    assert plan is not None and plan.files   # it would delete what the compaction merged
    store = TimelineStore(t.storage)
    when = next_instant_time(now_ms(), t.timeline().newest_time())
    store.create_requested(Instant(when, "clean"), replace(plan, instant_time=when).dumps())
    with pytest.raises(RollbackBlocked, match=f"clean {when} is pending and may delete the files compaction"):
        rollback_completed(t.storage, t.config, t.lock, c.requested_time)
