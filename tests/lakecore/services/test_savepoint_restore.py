"""Restore to a savepoint: reads equal the savepoint's time-travel read (merge-on-read with
compactions in between, copy-on-write), new writes work after it, a live writer is refused, a dry
run changes nothing, and a restore killed (SIGKILL) after its first deleted file is finished by a rerun."""

import os
import signal
import subprocess
import sys

import pytest

from lakecore import State, Table
from lakecore.concurrency.rollback import abort_pending
from lakecore.errors import WriterLive
from lakecore.services import UndoPlan, create_savepoint, list_savepoints, restore, schedule_compaction
from tests.lakecore.services.conftest import HeldWrite, compact, create, rows, snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# The child patches the delete step (the product code carries no test hooks) and dies after one file.
CHILD = """
import importlib, os, signal, sys
rc = importlib.import_module("lakecore.services.undo")  # the package attr is the function
from lakecore import Table
from lakecore.services import restore
real = rc._delete_file
def once(storage, path):
    real(storage, path)
    os.kill(os.getpid(), signal.SIGKILL)
rc._delete_file = once
t = Table.open(sys.argv[1])
restore(t.storage, t.config, t.lock, sys.argv[2], dry_run=False)
"""


def _data_files(t):
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


def _timeline_files(t):
    return set(t.storage.list_names(".weir/timeline"))


def _history(t, table_type):
    """Writes, savepoints the second write, then writes (and compacts) more; returns the savepoint."""
    t.upsert(rows(list(range(10)), 1))
    second = t.upsert(rows(list(range(5)), 2)).instant.requested_time
    if table_type == "merge_on_read":
        compact(t)
    sp = create_savepoint(t.storage, t.lock, second)
    t.upsert(rows(list(range(3, 14)), 3))
    if table_type == "merge_on_read":
        compact(t)
    t.delete(rows([1, 8], 4).select(["id", "ts"]))
    t.upsert(rows([2, 30], 5))
    return sp.requested_time, second


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_restore_reads_exactly_the_savepoint(tmp_path, table_type):
    t = create(str(tmp_path / "t"), "event_time", table_type=table_type)
    sp, second = _history(t, table_type)
    then = snapshot(t, as_of=second)
    assert snapshot(t) != then
    before_files = _data_files(t)
    done = restore(t.storage, t.config, t.lock, sp, dry_run=False)
    assert done is not None and not isinstance(done, UndoPlan) and done.action == "restore"
    assert done.is_completed
    extra = t.commit_metadata(done).extra
    assert extra["restored_to"] == second
    assert len(extra["undone"]) == (5 if table_type == "merge_on_read" else 3)
    assert snapshot(t) == then == snapshot(Table.open(t.uri))
    assert _data_files(t) == before_files - set(extra["files"])
    assert [s.instant_time for s in list_savepoints(t.storage)] == [sp]  # the savepoint stays
    assert restore(t.storage, t.config, t.lock, sp, dry_run=False) is None  # nothing left to undo

    t.upsert(rows([2, 77], 9))  # writes work on the restored table
    expected = {r["id"]: r for r in then}
    expected.update({r["id"]: r for r in rows([2, 77], 9).to_pylist()})
    assert snapshot(t) == sorted(expected.values(), key=lambda r: r["id"])


def test_restore_rolls_back_dead_pending_writes_and_refuses_live_ones(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    sp, second = _history(t, "merge_on_read")
    live = HeldWrite(t, rows([5, 6], 7))  # began just now: its heartbeat counts as fresh
    before_timeline, before_files = _timeline_files(t), _data_files(t)
    with pytest.raises(WriterLive, match=live.txn.instant.requested_time):
        restore(t.storage, t.config, t.lock, sp, dry_run=False)
    assert (_timeline_files(t), _data_files(t)) == (before_timeline, before_files)
    t.maintenance.rollback(live.txn.instant.requested_time, dry_run=False, force=True)

    pending = schedule_compaction(t.storage, t.config, t.lock)
    assert pending is not None
    done = restore(t.storage, t.config, t.lock, sp, dry_run=False)
    assert done is not None and not isinstance(done, UndoPlan)
    assert t.commit_metadata(done).extra["rolled_back_pending"] == [pending.instant_time]
    assert not t.timeline().pending
    assert snapshot(t) == snapshot(t, as_of=second)


def test_restore_rolls_back_an_aborted_write_without_waiting_for_its_heartbeat(tmp_path):
    """A write whose driver is known gone (the operator recorded its proof of death: a suspended writer's
    pod deleted) can never commit: restore rolls it back at once, though its heartbeat is still fresh."""
    t = create(str(tmp_path / "t"), "event_time")
    sp, second = _history(t, "merge_on_read")
    cut = HeldWrite(t, rows([5, 6], 7)).txn.instant.requested_time
    assert abort_pending(t.storage, t.lock, cut, "weir operator: its driver was stopped")
    done = restore(t.storage, t.config, t.lock, sp, dry_run=False)
    assert done is not None and not isinstance(done, UndoPlan)
    assert t.commit_metadata(done).extra["rolled_back_pending"] == [cut]
    assert not t.timeline().pending
    assert snapshot(t) == snapshot(t, as_of=second)


def test_restore_dry_run_changes_nothing(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    sp, second = _history(t, "merge_on_read")
    before = (_timeline_files(t), _data_files(t), snapshot(t))
    plan = restore(t.storage, t.config, t.lock, sp)
    assert isinstance(plan, UndoPlan) and plan.restored_to == second and len(plan.undone) == 5
    assert set(plan.files) <= before[1]
    assert (_timeline_files(t), _data_files(t), snapshot(t)) == before


def test_a_killed_restore_is_finished_by_a_rerun(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    sp, second = _history(t, "merge_on_read")
    then, files = snapshot(t, as_of=second), _data_files(t)
    plan = restore(t.storage, t.config, t.lock, sp)
    assert isinstance(plan, UndoPlan)
    proc = subprocess.run([sys.executable, "-c", CHILD, t.uri, sp], cwd=ROOT, capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert len(files - _data_files(t)) == 1  # died right after its first deleted file
    [rs] = [i for i in t.timeline().instants if i.action == "restore"]
    assert rs.state is State.COMPLETED  # the restore was recorded before anything was deleted
    assert snapshot(t) == then  # undone instants are gone already: reads are the savepoint's

    again = Table.open(t.uri)
    done = restore(again.storage, again.config, again.lock, sp, dry_run=False)
    assert done == rs
    assert _data_files(again) == files - set(plan.files)
    assert snapshot(again) == then
    assert restore(again.storage, again.config, again.lock, sp, dry_run=False) is None


def test_a_restore_that_died_before_dropping_the_undone_instants_is_finished(tmp_path, monkeypatch):
    import importlib
    rc = importlib.import_module("lakecore.services.undo")
    t = create(str(tmp_path / "t"), "event_time")
    sp, second = _history(t, "merge_on_read")
    then, now = snapshot(t, as_of=second), snapshot(t)

    def die(storage, name):
        raise KeyboardInterrupt("died after completing the restore")

    monkeypatch.setattr(rc, "_delete_instant", die)
    with pytest.raises(KeyboardInterrupt):
        restore(t.storage, t.config, t.lock, sp, dry_run=False)
    monkeypatch.undo()
    [rs] = [i for i in t.timeline().instants if i.action == "restore"]
    assert rs.is_completed and snapshot(t) == now  # recorded, nothing undone yet: reads are unchanged
    assert restore(t.storage, t.config, t.lock, sp, dry_run=False) == rs
    assert snapshot(t) == then


def test_a_write_a_savepoint_keeps_cannot_be_rolled_back_until_the_savepoint_goes(tmp_path):
    """Rolling back the first write under a savepoint of the second deleted files the savepoint keeps:
    the restore then gave a table without the first write's rows (it was allowed: only the savepointed
    write itself was refused)."""
    from lakecore.errors import RollbackBlocked

    t = create(str(tmp_path / "t"), "event_time")
    first = t.upsert(rows([1, 2], 1)).instant
    second = t.upsert(rows([3], 1)).instant
    t.maintenance.savepoint(second)
    t.upsert(rows([4], 1))
    for target in (first, second):
        told = rf"savepoint \d{{17}} keeps the table as of {second.requested_time}, which " \
            rf"{target.requested_time} is part of; delete the savepoint first \(`weir table savepoint URI " \
            r"--delete \d{17}`\)"
        with pytest.raises(RollbackBlocked, match=told):
            t.maintenance.rollback(target, dry_run=False)
    [sp] = t.maintenance.savepoints()
    assert sp.savepointed == second.requested_time
    t.maintenance.restore(sp, dry_run=False)   # as savepoints() lists it (a TypeError before)
    assert sorted(Table.open(t.uri).read().column("id").to_pylist()) == [1, 2, 3], "the savepoint's rows"
    t.maintenance.delete_savepoint(sp)
    assert t.maintenance.savepoints() == []
    assert t.maintenance.rollback(second, dry_run=False).instant is not None   # let go: allowed again
    assert sorted(Table.open(t.uri).read().column("id").to_pylist()) == [1, 2]
