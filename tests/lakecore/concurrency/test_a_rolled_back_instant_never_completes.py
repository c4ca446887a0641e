"""Once a rollback of T is pending or completed, T never completes — whatever the interleaving.

Before: the rollback completed under the lock but removed T's requested/inflight files after it, and
only *pending* rollbacks counted as claims, so a writer committing in that window (or after the
rollback's process died there) completed an instant whose files were gone; and a writer stalled
between its requested and inflight instant re-created an inflight file after the rollback and
committed it. Now the target leaves the timeline in the rollback's locked section, and the rollback
records T's proof of death (`.weir/aborted/T`) before anything else, which the commit checks."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakecore.concurrency.rollback as rollback_module
from lakecore import Table
from lakecore.concurrency import begin_write, commit_write, rollback_write
from lakecore.concurrency.liveness.heartbeat import is_aborted
from lakecore.errors import InvalidInstantState
from lakecore.timeline import Instant, TimelineStore
from lakecore.write import conform, route, write_file_group

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    t.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    return t


def written(t: Table, ids: list[int]):
    """A write that has written its files and not committed: (transaction, stats)."""
    txn = begin_write(t.storage, t.config, t.lock, "upsert")
    data = pa.table({"id": ids, "v": [f"new{i}" for i in ids]}, schema=SCHEMA)
    stats = [s for g in route(conform(data, t.config, "upsert").rows, t.config)
             for s in write_file_group(txn.context(), g)]
    return txn, stats


def test_a_writer_committing_right_after_the_rollback_completed_is_refused(tmp_path, monkeypatch):
    t = table(tmp_path)
    txn, stats = written(t, [1, 3])
    attempts: list[BaseException | Instant] = []
    real = rollback_module.delete_markers

    def commit_in_the_window(storage, instant_time):  # runs right after the rollback's locked section
        try:
            attempts.append(commit_write(txn, stats, lock=t.lock))
        except InvalidInstantState as exc:
            attempts.append(exc)
        real(storage, instant_time)

    monkeypatch.setattr(rollback_module, "delete_markers", commit_in_the_window)
    assert rollback_write(t.storage, t.lock, txn.instant) is not None
    assert len(attempts) == 1 and isinstance(attempts[0], InvalidInstantState), attempts
    fresh = Table.open(t.uri)
    assert fresh.read().sort_by("id").to_pylist() == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert fresh.timeline().find(txn.instant.requested_time) is None


def test_a_writer_stalled_before_inflight_cannot_revive_its_rolled_back_instant(tmp_path):
    t = table(tmp_path)
    store = TimelineStore(t.storage)
    requested = store.create_requested(Instant("20200101000000000", "deltacommit"))  # an old, dead writer
    assert rollback_write(t.storage, t.lock, requested) is not None
    assert is_aborted(t.storage, requested.requested_time)
    # the stalled writer wakes up, moves its instant inflight and commits: refused
    inflight = store.transition_inflight(requested)
    txn, stats = written(t, [4])
    stale = type(txn)(txn.storage, txn.config, inflight, txn.operation, txn.started_after, {},
                      txn.schema_at_start)
    with pytest.raises(InvalidInstantState, match="aborted"):
        commit_write(stale, [], lock=t.lock)
    commit_write(txn, stats, lock=t.lock)  # other writers are unaffected
    assert sorted(r["id"] for r in Table.open(t.uri).read().to_pylist()) == [1, 2, 4]


def test_a_rollback_that_died_after_claiming_still_blocks_the_commit(tmp_path, monkeypatch):
    t = table(tmp_path)
    txn, stats = written(t, [5])

    class Died(Exception):
        pass

    def die(*a, **kw):
        raise Died

    monkeypatch.setattr(rollback_module, "_execute", die)  # dies right after claiming
    with pytest.raises(Died):
        rollback_write(t.storage, t.lock, txn.instant)
    monkeypatch.undo()
    with pytest.raises(InvalidInstantState):
        commit_write(txn, stats, lock=t.lock)
    assert [r["id"] for r in Table.open(t.uri).read().sort_by("id").to_pylist()] == [1, 2]
