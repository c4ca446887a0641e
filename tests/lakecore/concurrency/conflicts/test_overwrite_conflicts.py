"""An overwrite conflicts with every concurrent write into the partitions it replaces, under
optimistic and non-blocking concurrency alike (log appends included), and with nothing outside them:

- a write that completes into the scope while the overwrite runs makes the overwrite lose (else the
  write's log would join the overwrite's new slice and survive it);
- a write that started before the overwrite completed and commits after it loses (else its rows
  would land on an overwritten partition it never saw);
- table services planned while an overwrite is pending leave its partitions alone.

Writers run on threads; a pause hook on the commit forces each interleaving."""

import threading
from collections.abc import Callable

import pyarrow as pa
import pytest

import lakecore.concurrency.transaction as tx
from lakecore import Table
from lakecore.errors import WriteConflict
from lakecore.layout.murmur3 import bucket_of  # the hash of new tables
from lakecore.services import CompactionStrategy, schedule_compaction

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
MODES = ["optimistic", "non_blocking"]


def keys_in_bucket(bucket: int, n: int, buckets: int = 4) -> list[int]:
    ids = pa.array(range(2000), pa.int64())
    return [k for k, b in zip(ids.to_pylist(), bucket_of([ids], buckets).tolist(), strict=True)
            if b == bucket][:n]


def batch(ids, dt, v, ts=1):
    n = len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "dt": pa.array([dt] * n, pa.string()),
                     "ts": pa.array([ts] * n, pa.int64()), "v": pa.array([v] * n, pa.string())})


B0 = keys_in_bucket(0, 3)  # three keys of bucket 0
OLD_B = [("b", k, "old") for k in B0]


def state(t):
    return sorted((r["dt"], r["id"], r["v"]) for r in t.read().to_pylist())


def table(tmp_path, mode, table_type="merge_on_read"):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", partition_fields=["dt"],
                     ordering_field="ts", concurrency_mode=mode, table_type=table_type)
    t.upsert(pa.concat_tables([batch(B0, "a", "old"), batch(B0, "b", "old")]))
    return t


class PausedCommit:
    """Holds the commit of the writes `which(txn)` selects until `go` is set, after `reached`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, which: Callable[[tx.WriteTransaction], bool]):
        self.reached, self.go = threading.Event(), threading.Event()
        real = tx.commit_write

        def commit(txn, *a, **kw):
            if which(txn):
                self.reached.set()
                assert self.go.wait(60)
            return real(txn, *a, **kw)

        monkeypatch.setattr("lakecore.table.writer.commit_write", commit)


class Background:
    """Runs a write on a thread and keeps its result or error."""

    def __init__(self, fn: Callable[[], object]):
        self.result: object = None
        self.error: BaseException | None = None

        def run():
            try:
                self.result = fn()
            except BaseException as exc:
                self.error = exc

        self.thread = threading.Thread(target=run)
        self.thread.start()

    def join(self):
        self.thread.join(60)
        assert not self.thread.is_alive()
        return self


def overwriting(txn):
    return txn.scope is not None


def upserting(txn):
    return txn.scope is None


@pytest.mark.parametrize("mode", MODES)
def test_a_write_completed_into_the_scope_while_the_overwrite_ran_makes_it_lose(tmp_path, monkeypatch, mode):
    t = table(tmp_path, mode)
    pause = PausedCommit(monkeypatch, overwriting)
    ow = Background(lambda: t.insert_overwrite(batch(B0[:1], "a", "new")))
    assert pause.reached.wait(60)
    # into a file group of the scope the overwrite had not seen (bucket 2 did not exist in a)
    t.upsert(batch(keys_in_bucket(2, 2), "a", "concurrent"))
    pause.go.set()
    ow.join()
    assert isinstance(ow.error, WriteConflict)
    (conflict,) = ow.error.conflicts
    assert {p for p, _ in conflict.file_groups} == {"dt=a"}
    assert "retry" in str(ow.error)
    concurrent = [("a", k, "concurrent") for k in keys_in_bucket(2, 2)]
    expected = sorted([("a", k, "old") for k in B0] + OLD_B + concurrent)
    assert state(t) == expected
    assert t.timeline().pending == ()
    assert [i.action for i in t.timeline().completed][-2:] == ["deltacommit", "rollback"]


@pytest.mark.parametrize("mode", MODES)
def test_a_write_started_before_the_overwrite_completed_loses_when_it_commits_after(tmp_path, monkeypatch,
                                                                                      mode):
    t = table(tmp_path, mode)
    pause = PausedCommit(monkeypatch, upserting)
    up = Background(lambda: t.upsert(batch(B0[:1] + keys_in_bucket(1, 1), "a", "late")))
    assert pause.reached.wait(60)
    monkeypatch.undo()  # the overwrite commits unpaused
    t.insert_overwrite(batch(B0[:1], "a", "new"))
    pause.go.set()
    up.join()
    assert isinstance(up.error, WriteConflict)  # a log append too, under non-blocking concurrency
    assert state(t) == sorted([("a", B0[0], "new"), *OLD_B])
    assert t.timeline().pending == ()


@pytest.mark.parametrize("mode", MODES)
def test_writes_outside_the_scope_never_conflict_either_way(tmp_path, monkeypatch, mode):
    t = table(tmp_path, mode)
    pause = PausedCommit(monkeypatch, overwriting)
    ow = Background(lambda: t.insert_overwrite(batch(B0[:1], "a", "new")))
    assert pause.reached.wait(60)
    t.upsert(batch(B0, "b", "during"))
    pause.go.set()
    assert ow.join().error is None
    monkeypatch.undo()
    pause = PausedCommit(monkeypatch, upserting)
    up = Background(lambda: t.upsert(batch(keys_in_bucket(1, 2), "b", "after")))
    assert pause.reached.wait(60)
    monkeypatch.undo()
    t.insert_overwrite(batch(B0[:1], "a", "newer"))
    pause.go.set()
    assert up.join().error is None
    assert state(t) == sorted([("a", B0[:1][0], "newer")]
                              + [("b", k, "during") for k in B0]
                              + [("b", k, "after") for k in keys_in_bucket(1, 2)])


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_two_overwrites_of_one_partition_the_later_committer_loses(tmp_path, monkeypatch, table_type):
    t = table(tmp_path, "optimistic", table_type)
    pause = PausedCommit(monkeypatch, overwriting)
    first = Background(lambda: t.insert_overwrite_table(batch(keys_in_bucket(3, 1), "c", "first")))
    assert pause.reached.wait(60)
    monkeypatch.undo()
    t.insert_overwrite(batch(keys_in_bucket(1, 1), "a", "second"))
    pause.go.set()
    assert isinstance(first.join().error, WriteConflict)
    assert state(t) == sorted([("a", keys_in_bucket(1, 1)[0], "second"), *OLD_B])


def test_a_compaction_planned_beside_a_pending_overwrite_leaves_its_partitions_alone(tmp_path, monkeypatch):
    t = table(tmp_path, "non_blocking")
    t.upsert(pa.concat_tables([batch(B0, "a", "old2"), batch(B0, "b", "old2")]))
    pause = PausedCommit(monkeypatch, overwriting)
    ow = Background(lambda: t.insert_overwrite(batch(B0[:1], "a", "new")))
    assert pause.reached.wait(60)
    plan = schedule_compaction(t.storage, t.config, t.lock, CompactionStrategy("all"))
    assert plan is not None and {op.partition for op in plan.operations} == {"dt=b"}
    pause.go.set()
    assert ow.join().error is None
    t.maintenance.compact(resume=True)
    assert state(t) == sorted([("a", B0[:1][0], "new")]
                              + [("b", k, "old2") for k in B0])
