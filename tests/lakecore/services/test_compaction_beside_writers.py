"""Compaction and writers run side by side: a write in flight while the plan is made lands in the
new slice, neither aborts the other under optimistic concurrency, one compaction at a time."""

import pytest

from lakecore.errors import CompactionPending, NotMergeOnRead, WriteConflict
from lakecore.services import rollback_compaction, run_compaction, schedule_compaction
from tests.lakecore.services.conftest import HeldWrite, compact, create, log_counts, rows, snapshot


@pytest.mark.parametrize("commit_before_run", [True, False])
def test_write_in_flight_at_plan_time_joins_the_new_slice(tmp_path, commit_before_run):
    t = create(str(tmp_path / "t"), "commit_time")
    t.upsert(rows(list(range(10)), 1))
    t.upsert(rows([1, 2], 2))
    held = HeldWrite(t, rows([1, 2, 3, 40], 3))       # started, files written, not committed
    plan = schedule_compaction(t.storage, t.config, t.lock)
    assert plan is not None
    planned = {n for op in plan.operations for n in op.log_files}
    assert not planned & {s.file_name for s in held.stats}
    if commit_before_run:
        held.commit()
        run_compaction(t.storage, t.config, t.lock, plan)
    else:
        run_compaction(t.storage, t.config, t.lock, plan)
        held.commit()
    got = {r["id"]: r["name"] for r in snapshot(t)}
    assert sorted(got) == [*range(10), 40]
    assert got[1] == "n1@3" and got[3] == "n3@3" and got[4] == "n4@1"  # no lost update
    assert sum(log_counts(t)) == len(held.stats)   # only the late write's logs remain, on the new bases
    assert all(op.base_file is None for op in plan.operations)
    compact(t)
    assert {r["id"]: r["name"] for r in snapshot(t)} == got


def test_writers_under_occ_and_a_compaction_never_abort_each_other(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    assert t.config.concurrency_mode == "optimistic"
    t.upsert(rows(list(range(20)), 1))
    before_plan = HeldWrite(t, rows(list(range(20)), 2))   # every file group, started before the plan
    plan = schedule_compaction(t.storage, t.config, t.lock)
    assert plan is not None
    try:
        before_plan.commit()   # writers overlap only the compaction, never each other
        after_plan = HeldWrite(t, rows(list(range(5)), 3))
        run_compaction(t.storage, t.config, t.lock, plan)
        after_plan.commit()
        during = HeldWrite(t, rows([7], 4))
        compact(t)
        during.commit()
    except WriteConflict as exc:  # pragma: no cover - the assertion is that this never happens
        pytest.fail(f"a compaction made a writer abort: {exc}")
    got = {r["id"]: r["ts"] for r in snapshot(t)}
    assert got == {**dict.fromkeys(range(20), 2), **dict.fromkeys(range(5), 3), 7: 4}


def test_one_compaction_at_a_time_and_rollback_frees_the_table(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows([1, 2, 3], 1))
    plan = schedule_compaction(t.storage, t.config, t.lock)
    assert plan is not None
    with pytest.raises(CompactionPending, match=plan.instant_time):
        schedule_compaction(t.storage, t.config, t.lock)
    rollback_compaction(t.storage, t.lock, plan.instant_time)
    assert not [i for i in t.timeline().pending]
    again = schedule_compaction(t.storage, t.config, t.lock)
    assert again is not None and again.instant_time > plan.instant_time
    with pytest.raises(Exception, match="rolled back"):
        run_compaction(t.storage, t.config, t.lock, plan)
    run_compaction(t.storage, t.config, t.lock, again)
    assert [r["id"] for r in snapshot(t)] == [1, 2, 3]


def test_nothing_to_compact_schedules_nothing_and_copy_on_write_is_refused(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    assert schedule_compaction(t.storage, t.config, t.lock) is None
    assert t.timeline().instants == ()
    cow = create(str(tmp_path / "cow"), "event_time", table_type="copy_on_write")
    with pytest.raises(NotMergeOnRead):
        schedule_compaction(cow.storage, cow.config, cow.lock)
