"""Compaction rewrites merge-on-read slices into base files without changing any answer: the
snapshot, time travel to before it, and incremental reads stay the same; afterwards slices have no
logs and the snapshot reads base files only."""

import itertools

import pyarrow as pa
import pytest

from lakecore.services import CompactionStrategy
from tests.lakecore.services.conftest import changes, compact, create, keys, log_counts, rows, snapshot


def net(rows):
    """The change per key: an upsert wins over a delete of the same commit (the barrier row)."""
    out = {}
    for r in map(dict, rows):
        cur = out.get(r["id"])
        if cur is None or (r["_weir_commit_time"], r["_weir_op"] == "upsert") > \
                (cur["_weir_commit_time"], cur["_weir_op"] == "upsert"):
            out[r["id"]] = r
    return out


def _history(t, mode):
    instants = []
    if mode == "partial_update":
        def clicks(ids, ts):
            return pa.table({"id": pa.array(ids, pa.int64()),
                             "clicks": pa.array([i * ts for i in ids], pa.int64()),
                             "click_ts": pa.array([ts] * len(ids), pa.int64())})

        def dims(ids, ts):
            return pa.table({"id": pa.array(ids, pa.int64()), "country": [f"c{i}{ts}" for i in ids],
                             "dim_ts": pa.array([ts] * len(ids), pa.int64())})
        for w in (clicks(range(10), 5), dims(range(5, 15), 3), clicks(range(3, 8), 2), dims(range(0, 4), 9),
                  clicks(range(12, 20), 7)):
            instants.append(t.upsert(w).instant)
        instants.append(t.delete(pa.table({"id": pa.array([1, 13], pa.int64())})).instant)
        instants.append(t.upsert(clicks([1], 1)).instant)
        return instants
    instants.append(t.upsert(rows(list(range(20)), 5)).instant)
    instants.append(t.upsert(rows([1, 2, 3, 21], 7)).instant)
    instants.append(t.upsert(rows([2, 4], 3)).instant)           # late events under event time
    instants.append(t.delete(keys([5, 6])).instant)
    instants.append(t.upsert(rows([6, 22], 1)).instant)          # re-creates key 6
    if mode == "event_time":
        instants.append(t.delete(keys([7, 8], [9, 1])).instant)  # 7 deleted, 8's delete too old
    return instants


@pytest.mark.parametrize("mode", ["event_time", "commit_time", "partial_update"])
def test_compaction_changes_no_answer(tmp_path, mode):
    t = create(str(tmp_path / "t"), mode)
    instants = _history(t, mode)
    before = snapshot(t)
    past = {i.requested_time: snapshot(t, as_of=i.requested_time) for i in instants}
    first, last = instants[0].requested_time, instants[-1].requested_time
    incremental = [changes(t, a.requested_time, b.requested_time)
                   for a, b in itertools.pairwise(instants)]
    assert max(log_counts(t)) > 1

    done = compact(t)
    assert done is not None and done.action == "compaction"
    assert snapshot(t) == before
    assert log_counts(t) == [0] * len(log_counts(t))
    assert snapshot(t, query="read_optimized") == before  # base files alone hold the whole state
    for instant_time, expected in past.items():
        assert snapshot(t, as_of=instant_time) == expected
    assert incremental == [changes(t, a.requested_time, b.requested_time)
                           for a, b in itertools.pairwise(instants)]
    # A range ending after the compaction reads its base file. Slices with logs also report the
    # barrier row of a key deleted and re-created (a delete beside the upsert, same commit time);
    # a base file holds only the outcome, so compare the net change per key.
    assert net(changes(t, first)) == net(changes(t, first, last))
    assert compact(t) is None  # nothing left to compact


@pytest.mark.parametrize("mode", ["event_time", "commit_time", "partial_update"])
def test_writes_after_a_compaction_merge_over_the_new_base(tmp_path, mode):
    t = create(str(tmp_path / "t"), mode)
    _history(t, mode)
    compact(t)
    _history(t, mode)
    before = snapshot(t)
    compact(t)
    assert snapshot(t) == before


def test_compaction_of_logs_only_slices_keeps_commit_times(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    a = t.upsert(rows([1, 2], 1)).instant
    compact(t)
    meta = snapshot(t, with_meta=True)
    assert {r["_weir_commit_time"] for r in meta} == {a.requested_time}
    assert all(r["_weir_file_name"].endswith(".parquet") for r in meta)


def test_strategies_leave_unchosen_slices_with_their_logs(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows([0, 1, 2, 3], 1))
    t.upsert(rows([0, 2, 4], 2))   # bucket membership decides which slice has more logs
    before = snapshot(t)
    counts = sorted(log_counts(t))
    compact(t, CompactionStrategy("log_count", min_logs=max(counts)))
    assert snapshot(t) == before
    assert 0 in log_counts(t)
