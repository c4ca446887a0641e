"""A savepoint pins the files of a past read: clean keeps them under every policy until the savepoint
is deleted; savepoints are listed, created idempotently, and refused while a clean is pending."""

import pytest

from lakecore.errors import CleanPending, InstantNotFound, InvalidInput, SavepointNotFound
from lakecore.services import CleanPolicy, create_savepoint, delete_savepoint, list_savepoints, run_clean
from lakecore.services.clean import ACTION as CLEAN
from lakecore.timeline import Instant, TimelineStore, now_ms
from tests.lakecore.services.conftest import compact, create, rows, snapshot

POLICIES = [CleanPolicy("keep_latest_commits", 1), CleanPolicy("keep_latest_file_versions", 1),
            CleanPolicy("keep_by_hours", 1)]


def _later():
    return now_ms() + 3 * 3_600_000  # keep_by_hours 1 then retains only the latest view


def _data_files(t):
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


def _history(t):
    """Returns the instant time of the second write; every file group is rewritten after it."""
    t.upsert(rows(list(range(10)), 1))
    second = t.upsert(rows(list(range(5)), 2)).instant.requested_time
    compact(t)
    t.upsert(rows(list(range(10)), 3))
    compact(t)
    t.upsert(rows([1, 8], 4))
    return second


@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: p.kind)
@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_clean_keeps_every_savepointed_file_under_every_policy(tmp_path, policy, table_type):
    t = create(str(tmp_path / "t"), "event_time", table_type=table_type)
    if table_type == "copy_on_write":
        t.upsert(rows(list(range(10)), 1))
        second = t.upsert(rows(list(range(5)), 2)).instant.requested_time
        t.upsert(rows(list(range(10)), 3))
        t.upsert(rows([1, 8], 4))
    else:
        second = _history(t)
    then = snapshot(t, as_of=second)
    sp = create_savepoint(t.storage, t.lock, second, comment="before the backfill")
    [saved] = list_savepoints(t.storage)
    assert (saved.instant_time, saved.savepointed, saved.comment) == (sp.requested_time, second,
                                                                      "before the backfill")
    assert set(saved.files) <= _data_files(t)
    done = run_clean(t.storage, t.config, t.lock, policy, dry_run=False, clock=_later)
    assert done is not None  # something was garbage, just not the savepointed files
    assert set(saved.files) <= _data_files(t)
    assert snapshot(t, as_of=second) == then

    delete_savepoint(t.storage, t.lock, sp.requested_time)
    assert list_savepoints(t.storage) == []
    assert run_clean(t.storage, t.config, t.lock, policy, dry_run=False, clock=_later) is not None
    assert not set(saved.files) <= _data_files(t)


def test_savepoint_is_idempotent_and_checks_its_target(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    first = t.upsert(rows([1, 2], 1)).instant.requested_time
    a = create_savepoint(t.storage, t.lock, first, comment="before the backfill")
    assert create_savepoint(t.storage, t.lock, first) == a
    assert create_savepoint(t.storage, t.lock, first, comment="before the backfill") == a
    # another comment was dropped with no word: the savepoint kept its first
    with pytest.raises(InvalidInput, match=r"savepointed already .*comment 'before the backfill'.*'v2' "
                                           "would be lost: delete that savepoint first"):
        create_savepoint(t.storage, t.lock, first, comment="v2")
    with pytest.raises(InstantNotFound, match="completed write instant"):
        create_savepoint(t.storage, t.lock, a.requested_time)  # a savepoint is no write
    with pytest.raises(SavepointNotFound,
                       match=r"weir table savepoint URI --list` \(Python: table.maintenance.savepoints"):
        delete_savepoint(t.storage, t.lock, "20200101000000000")


def test_savepoint_refused_while_a_clean_is_pending(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    first = t.upsert(rows([1, 2], 1)).instant.requested_time
    TimelineStore(t.storage).create_requested(Instant("20991231000000000", CLEAN), b"{}")
    with pytest.raises(CleanPending, match="run_clean"):
        create_savepoint(t.storage, t.lock, first)
