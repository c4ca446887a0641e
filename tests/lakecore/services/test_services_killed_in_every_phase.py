"""kill -9 in every phase of compaction, clean, savepoint creation, restore and rollback of the latest
write: right after the kill the table reads exactly as before the service (or, where the service had
already taken effect, exactly as after it), and the next run finishes or rolls back the service,
leaving exactly the expected final state — no pending instant, marker dir or orphan data file left.

Each case kills a child (`service_crash.py`) once; where two next runs are checked (resume and
rollback of a compaction, the service's own rerun and `resume_undos`), the second one runs on a copy
of the killed table."""

import os
import shutil
import signal
import subprocess
import sys

import pytest

from lakecore import State, Table
from lakecore.config import LockSpec
from lakecore.errors import FilesCleaned, InvalidInstantState
from lakecore.services import (
    CleanPlan,
    CleanPolicy,
    list_savepoints,
    pending_compactions,
    resume_undos,
    rollback_compaction,
    run_clean,
    run_compaction,
)
from lakecore.services.compaction import load_plan
from lakecore.timeline import WRITE_ACTIONS, TimelineStore
from tests.lakecore.services.conftest import compact, create, keys, log_counts, rows, snapshot
from tests.lakecore.services.service_crash import CLEAN_POLICY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DATA = r"^(?!\.weir/)"          # a data file
TIMELINE = r"^\.weir/timeline/"  # an instant file
CLEAN = CleanPolicy(*CLEAN_POLICY)  # type: ignore[arg-type]
# the killed child and then this process write the table in turn: an in-process lock, recorded as such
ONE_PROCESS_AT_A_TIME = LockSpec("in_process")


def _kill(t: Table, service: str, arg: str, method: str, regex: str, nth: int) -> None:
    proc = subprocess.run([sys.executable, "-m", "tests.lakecore.services.service_crash", t.uri, service, arg,
                           method, regex, str(nth)], cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr.decode()[-2000:])


def _reads(uri: str, points: list[str]):
    """The latest snapshot and the time-travel read as of every point, from a freshly opened table."""
    fresh = Table.open(uri)
    return snapshot(fresh), [snapshot(fresh, as_of=p) for p in points]


def _data_files(t: Table) -> set[str]:
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


def _named(t: Table) -> set[str]:
    """Every data file the completed write instants on the timeline name."""
    store = TimelineStore(t.storage)
    return {st.path for i in store.load().completed if i.action in WRITE_ACTIONS
            for st in store.metadata(i).write_stats}


def _markers(t: Table) -> list[str]:
    return [f.path for f in t.storage.list_tree(".weir/markers")]


def _copy(tmp_path, src: str, dest: str) -> Table:
    shutil.copytree(tmp_path / src, tmp_path / dest)
    return Table.open(str(tmp_path / dest))


def _tidy(t: Table) -> None:
    """Nothing pending, no marker left, and exactly the named data files on disk."""
    assert not t.timeline().pending
    assert not _markers(t)
    assert _data_files(t) == _named(t)


def _of(t: Table, action: str):
    return [i for i in t.timeline().instants if i.action == action]


# -- compaction ---------------------------------------------------------------------------------

COMPACTION = {  # phase: storage method, path regex, nth call, state of the compaction after the kill
    "schedule: after the requested plan": ("write_if_absent", r"\.compaction\.requested$", 1,
                                           State.REQUESTED),
    "execute: after the inflight file": ("write_if_absent", r"\.compaction\.inflight$", 1, State.INFLIGHT),
    "execute: after the first marker": ("write", r"^\.weir/markers/", 1, State.INFLIGHT),
    "commit: after the completed file": ("write_if_absent", r"_\d{17}\.compaction$", 1, State.COMPLETED),
    "commit: between marker deletions": ("delete", r"^\.weir/markers/", 1, State.COMPLETED),
}


@pytest.mark.parametrize("phase", list(COMPACTION))
def test_a_killed_compaction_is_resumed_or_rolled_back(tmp_path, phase):
    method, regex, nth, state = COMPACTION[phase]
    t = create(str(tmp_path / "a"), "event_time", lock=ONE_PROCESS_AT_A_TIME)
    points = [t.upsert(rows(list(range(30)), 1)).instant.requested_time,
              t.upsert(rows(list(range(0, 30, 3)), 2)).instant.requested_time,
              t.delete(keys([4, 5], 9)).instant.requested_time]
    before = _reads(t.uri, points)
    _tidy(t)
    _kill(t, "compact", "-", method, regex, nth)

    [p] = _of(t, "compaction")
    assert p.state is state
    # a compaction changes no read: its before- and after-state read alike; the view has its base
    # files (no log left in the latest slices) exactly when it completed
    assert _reads(t.uri, points) == before
    assert (sum(log_counts(t)) == 0) is (state is State.COMPLETED)
    copy = _copy(tmp_path, "a", "b")

    store = TimelineStore(t.storage)
    pending = [i.requested_time for i in pending_compactions(store, store.load())]
    assert pending == ([] if state is State.COMPLETED else [p.requested_time])
    done = run_compaction(t.storage, t.config, t.lock, load_plan(t.storage, p.requested_time))
    assert done.is_completed and done.requested_time == p.requested_time
    assert sum(log_counts(t)) == 0 and _reads(t.uri, points) == before
    _tidy(t)
    assert {s.path for s in t.commit_metadata(done).write_stats} == \
        {f for f in _data_files(t) if f.endswith(f"_{p.requested_time}.parquet")}

    if state is State.COMPLETED:  # not pending any more: undone like any latest write
        with pytest.raises(InvalidInstantState, match="completed"):
            rollback_compaction(copy.storage, copy.lock, p.requested_time)
        undo = copy.maintenance.rollback(p.requested_time, dry_run=False).instant
        assert undo.action == "rollback" and undo.is_completed
    else:
        assert rollback_compaction(copy.storage, copy.lock, p.requested_time) is not None
    assert copy.timeline().find(p.requested_time) is None
    assert sum(log_counts(copy)) > 0 and _reads(copy.uri, points) == before
    _tidy(copy)
    assert not [f for f in _data_files(copy) if p.requested_time in f]


# -- clean --------------------------------------------------------------------------------------

CLEAN_PHASES = {
    "schedule: after the requested plan": ("write_if_absent", r"\.clean\.requested$", 1, State.REQUESTED),
    "execute: after the inflight file": ("write_if_absent", r"\.clean\.inflight$", 1, State.INFLIGHT),
    "execute: after the first deleted data file": ("delete", DATA, 1, State.INFLIGHT),
    "execute: after the last deleted data file": ("delete", DATA, 4, State.INFLIGHT),
    "commit: after the completed file": ("write_if_absent", r"_\d{17}\.clean$", 1, State.COMPLETED),
}


def _outcomes(uri: str, points: list[str]) -> list:
    """The latest snapshot, then per point its time-travel read or "cleaned"."""
    fresh = Table.open(uri)
    out: list = [snapshot(fresh)]
    for p in points:
        try:
            out.append(snapshot(fresh, as_of=p))
        except FilesCleaned:
            out.append("cleaned")
    return out


@pytest.mark.parametrize("phase", list(CLEAN_PHASES))
def test_a_killed_clean_is_finished_by_the_next_one(tmp_path, phase):
    method, regex, nth, state = CLEAN_PHASES[phase]
    t = create(str(tmp_path / "a"), "event_time", lock=ONE_PROCESS_AT_A_TIME)
    points = [t.upsert(rows(list(range(10)), 1)).instant.requested_time,
              t.upsert(rows(list(range(5)), 2)).instant.requested_time]
    c = compact(t)
    assert c is not None
    points += [c.requested_time, t.upsert(rows([1, 8], 3)).instant.requested_time]
    before = _outcomes(t.uri, points)
    plan = run_clean(t.storage, t.config, t.lock, CLEAN)
    assert isinstance(plan, CleanPlan) and len(plan.files) == 4
    # the reference: the same clean, never killed, on a copy
    ref = _copy(tmp_path, "a", "ref")
    assert run_clean(ref.storage, ref.config, ref.lock, CLEAN, dry_run=False) is not None
    expected, expected_files = _outcomes(ref.uri, points), _data_files(ref)
    retained = [i for i, r in enumerate(expected) if r != "cleaned"]
    assert 0 < len(retained) < len(expected) and all(expected[i] == before[i] for i in retained)

    _kill(t, "clean", "-", method, regex, nth)
    [cl] = _of(t, "clean")
    assert cl.state is state
    # the latest snapshot and every retained point read as before (a clean changes none of them)
    fresh = Table.open(t.uri)
    assert [snapshot(fresh, **({"as_of": points[i - 1]} if i else {})) for i in retained] == \
        [before[i] for i in retained]

    again = Table.open(t.uri)
    done = run_clean(again.storage, again.config, again.lock, CLEAN, dry_run=False)
    if state is State.COMPLETED:
        assert done is None  # it had finished: nothing is left to clean
    else:
        assert done is not None and not isinstance(done, CleanPlan)
        assert done.requested_time == cl.requested_time and done.is_completed
        assert set(again.commit_metadata(done).extra["deleted"]) == set(plan.files)
    assert not again.timeline().pending and not _markers(again)
    assert _data_files(again) == expected_files
    assert _outcomes(again.uri, points) == expected


# -- savepoint creation -------------------------------------------------------------------------

SAVEPOINT_PHASES = {
    "after the requested instant": (r"\.savepoint\.requested$", State.REQUESTED),
    "after the inflight file": (r"\.savepoint\.inflight$", State.INFLIGHT),
}


@pytest.mark.parametrize("phase", list(SAVEPOINT_PHASES))
def test_a_killed_savepoint_is_dropped_by_the_next_savepoint_or_clean(tmp_path, phase):
    regex, state = SAVEPOINT_PHASES[phase]
    t = create(str(tmp_path / "a"), "event_time", lock=ONE_PROCESS_AT_A_TIME)
    points = [t.upsert(rows(list(range(10)), 1)).instant.requested_time,
              t.upsert(rows(list(range(5)), 2)).instant.requested_time]
    before = _reads(t.uri, points)
    _kill(t, "savepoint", points[1], "write_if_absent", regex, 1)
    [dead] = _of(t, "savepoint")
    assert dead.state is state and list_savepoints(t.storage) == []  # a pending savepoint pins nothing
    assert _reads(t.uri, points) == before
    copy = _copy(tmp_path, "a", "b")

    # drops the dead one under the lock, then savepoints
    sp = Table.open(t.uri).maintenance.savepoint(points[1]).instant
    assert sp.is_completed and sp.requested_time > dead.requested_time
    assert [(s.instant_time, s.savepointed) for s in list_savepoints(t.storage)] == \
        [(sp.requested_time, points[1])]
    assert t.commit_metadata(sp).extra["dropped_pending"] == [dead.requested_time]
    assert _reads(t.uri, points) == before
    _tidy(t)

    run_clean(copy.storage, copy.config, copy.lock, CLEAN, dry_run=False)  # drops it too
    assert list_savepoints(copy.storage) == [] and not _of(copy, "savepoint")
    assert _reads(copy.uri, points) == before
    _tidy(copy)


# -- restore and rollback of the latest write (one undo protocol) -------------------------------

UNDO_PHASES = {  # phase: storage method, path regex ({a}: the action), nth call, what reads show after it
    "after the requested plan": ("write_if_absent", r"\.{a}\.requested$", 1, "before"),
    "after the completed undo, before undone instants go": ("write_if_absent", r"_\d{{17}}\.{a}$", 1,
                                                            "before"),
    "after the first deleted instant file": ("delete", TIMELINE, 1, "before"),
    "after the newest undone instant's completed file": ("delete", TIMELINE, 3, "prefix"),
    "after the first deleted data file": ("delete", DATA, 1, "after"),
}


def _restore_history(t: Table):
    """Writes and compactions, a savepoint of the second write, then more; returns the savepoint, the
    points (every write instant, oldest first) and how many of them the savepoint keeps."""
    points = [t.upsert(rows(list(range(10)), 1)).instant.requested_time,
              t.upsert(rows(list(range(5)), 2)).instant.requested_time]
    sp = t.maintenance.savepoint(points[1]).instant.requested_time
    for step in (lambda: compact(t), lambda: t.upsert(rows(list(range(3, 14)), 3)), lambda: compact(t),
                 lambda: t.delete(keys([1, 8], 4)), lambda: t.upsert(rows([2, 30], 5))):
        out = step()
        assert out is not None
        points.append(out.requested_time if hasattr(out, "requested_time") else out.instant.requested_time)
    return sp, points, 2


def _rollback_history(t: Table):
    points = [t.upsert(rows(list(range(10)), 1)).instant.requested_time,
              t.upsert(rows(list(range(5)), 2)).instant.requested_time,
              t.upsert(rows([1, 2, 40], 3)).instant.requested_time]
    return points[-1], points, 2


def _expect(before, kept: int):
    """What the table reads once every write after the first `kept` points is undone."""
    travel = before[1]
    return travel[kept - 1], travel[:kept]


@pytest.mark.parametrize("phase", list(UNDO_PHASES))
@pytest.mark.parametrize("action", ["restore", "rollback"])
def test_a_killed_undo_is_finished_by_the_next_call_or_resume_undos(tmp_path, action, phase):
    method, regex, nth, shows = UNDO_PHASES[phase]
    t = create(str(tmp_path / "a"), "event_time", lock=ONE_PROCESS_AT_A_TIME)
    arg, points, kept = (_restore_history if action == "restore" else _rollback_history)(t)
    before = _reads(t.uri, points)
    files = _data_files(t)
    _tidy(t)
    _kill(t, action, arg, method, regex.format(a=action), nth)

    [u] = _of(t, action)
    assert u.is_completed is (phase != "after the requested plan")  # it completes before undoing
    # right after the kill: exactly the before-state, a prefix of the history (the newest undone
    # instant gone), or exactly the after-state
    if shows == "before":
        assert _reads(t.uri, points) == before
    elif shows == "prefix":
        left = len(points) - 1
        assert _reads(t.uri, points[:left]) == _expect(before, left)
    else:
        assert _reads(t.uri, points[:kept]) == _expect(before, kept)
    copy = _copy(tmp_path, "a", "b")

    again = Table.open(t.uri)
    undo = again.maintenance.restore if action == "restore" else again.maintenance.rollback
    done = undo(arg, dry_run=False).instant
    assert done is not None and not isinstance(done, CleanPlan)
    assert (done.requested_time, done.action) == (u.requested_time, action) and done.is_completed
    resumed = resume_undos(copy.storage, copy.lock)
    assert [(r.requested_time, r.action) for r in resumed] == [(u.requested_time, action)]

    for table in (again, copy):
        assert _reads(table.uri, points[:kept]) == _expect(before, kept)
        assert [i.requested_time for i in table.timeline().completed if i.action in WRITE_ACTIONS] == \
            points[:kept]
        _tidy(table)
        assert _data_files(table) == {f for f in files if f in _named(table)}
        assert not resume_undos(table.storage, table.lock)  # nothing left to finish
    if action == "restore":
        assert [s.instant_time for s in list_savepoints(again.storage)] == [arg]  # the savepoint stays
        assert again.maintenance.restore(arg, dry_run=False).instant is None
    else:
        assert again.maintenance.rollback(arg, dry_run=False).instant == done  # idempotent
