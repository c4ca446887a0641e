"""Clean deletes exactly the files of superseded file slices the policy does not retain — after
compactions (merge-on-read) and base rewrites (copy-on-write) — and changes no retained read."""

import itertools

import pytest

from lakecore import Table
from lakecore.errors import FilesCleaned
from lakecore.services import CleanPlan, CleanPolicy, check_readable, run_clean
from lakecore.timeline.instant_time import to_epoch_ms
from tests.lakecore.services.conftest import SCHEMA, changes, compact, create, rows, snapshot

IDS = list(range(12))  # both buckets in every write


def _files(t, instant):
    return {s.path for s in t.commit_metadata(instant).write_stats}


def _data_files(t):
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


def _mor_history(t):
    """W1, W2 (logs: base-less slice) C1 (base) W3 (log) C2 (base) W4 (log), in completion order."""
    w1 = t.upsert(rows(IDS, 1)).instant
    w2 = t.upsert(rows(IDS[:6], 2)).instant
    c1 = compact(t)
    w3 = t.upsert(rows(IDS[3:], 3)).instant
    c2 = compact(t)
    w4 = t.upsert(rows([1, 7], 4)).instant
    assert c1 is not None and c2 is not None
    return [w1, w2, c1, w3, c2, w4]


def _cow_history(t):
    return [t.upsert(rows(IDS, ts)).instant for ts in range(1, 5)]


def _reads(t, points):
    return ({p.requested_time: snapshot(t, as_of=p.requested_time) for p in points}, snapshot(t),
            [changes(t, a.requested_time, b.requested_time) for a, b in itertools.pairwise(points)])


def _check(t, policy, doomed, retained, now_ms=None):
    """Dry run lists `doomed`; the run deletes them and nothing else; retained reads are unchanged."""
    all_before = _data_files(t)
    reads = _reads(t, retained)
    clock = (lambda: now_ms) if now_ms is not None else None
    kw = {"clock": clock} if clock else {}
    plan = run_clean(t.storage, t.config, t.lock, policy, **kw)
    if not doomed:
        assert plan is None
        assert run_clean(t.storage, t.config, t.lock, policy, dry_run=False, **kw) is None
        assert _data_files(t) == all_before
        return None
    assert isinstance(plan, CleanPlan) and set(plan.files) == doomed
    assert _data_files(t) == all_before and not any(i.action == "clean" for i in t.timeline().instants)
    done = run_clean(t.storage, t.config, t.lock, policy, dry_run=False, **kw)
    assert done is not None and not isinstance(done, CleanPlan) and done.action == "clean"
    assert done.is_completed
    assert set(t.commit_metadata(done).extra["deleted"]) == doomed
    assert _data_files(t) == all_before - doomed
    assert _reads(t, retained) == reads
    assert run_clean(t.storage, t.config, t.lock, policy, dry_run=False, **kw) is None  # rerun: no-op
    assert run_clean(t.storage, t.config, t.lock, policy, **kw) is None
    return done


@pytest.mark.parametrize("policy, doomed_of, retained_from", [
    (CleanPolicy("keep_latest_commits", 1), ("w1", "w2", "c1", "w3"), "w4"),
    (CleanPolicy("keep_latest_commits", 2), ("w1", "w2"), "w3"),
    (CleanPolicy("keep_latest_commits", 3), (), "w2"),
    (CleanPolicy("keep_latest_commits"), (), "w1"),
    (CleanPolicy("keep_latest_file_versions", 1), ("w1", "w2", "c1", "w3"), "w4"),
    (CleanPolicy("keep_latest_file_versions", 2), ("w1", "w2"), "w4"),
    (CleanPolicy("keep_latest_file_versions", 3), (), "w1"),
])
def test_merge_on_read_after_compactions(tmp_path, policy, doomed_of, retained_from):
    t = create(str(tmp_path / "t"), "event_time")
    history = dict(zip(["w1", "w2", "c1", "w3", "c2", "w4"], _mor_history(t), strict=True))
    doomed = set().union(*[_files(t, history[k]) for k in doomed_of]) if doomed_of else set()
    names = list(history)
    retained = [history[k] for k in names[names.index(retained_from):]]
    latest = {p for s in t.read(with_meta=True).column("_weir_file_name").to_pylist() for p in [s]}
    done = _check(t, policy, doomed, retained)
    assert latest.isdisjoint({p.rsplit("/", 1)[-1] for p in doomed})  # the latest slice is never touched
    if done is not None and policy.kind == "keep_latest_commits":
        check_readable(t.storage, t.timeline(), retained[0].requested_time)
        with pytest.raises(FilesCleaned, match=f"clean {done.requested_time} deleted"):
            check_readable(t.storage, t.timeline(), history["w1"].requested_time)


@pytest.mark.parametrize("hours_after, doomed_of, retained_from", [
    ("w3", ("w1", "w2"), "w3"),                 # cutoff at W3's completion
    ("w4", ("w1", "w2", "c1", "w3"), "w4"),     # cutoff after everything: latest only
    ("w2", (), "w2"),
])
def test_keep_by_hours_with_an_injected_now(tmp_path, hours_after, doomed_of, retained_from):
    t = create(str(tmp_path / "t"), "commit_time")
    history = dict(zip(["w1", "w2", "c1", "w3", "c2", "w4"], _mor_history(t), strict=True))
    doomed = set().union(*[_files(t, history[k]) for k in doomed_of]) if doomed_of else set()
    names = list(history)
    cutoff = history[hours_after].completion_time
    assert cutoff is not None
    now = to_epoch_ms(cutoff) + 2 * 3_600_000
    _check(t, CleanPolicy("keep_by_hours", 2), doomed,
           [history[k] for k in names[names.index(retained_from):]], now_ms=now)


@pytest.mark.parametrize("n", [1, 2])
def test_copy_on_write_rewrites(tmp_path, n):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                     table_type="copy_on_write")
    writes = _cow_history(t)
    doomed = set().union(*[_files(t, w) for w in writes[:-n]])
    assert len(doomed) == 2 * (len(writes) - n)  # one base version per bucket per write
    _check(t, CleanPolicy("keep_latest_commits", n), doomed, writes[-n:])
    assert sorted(t.read().column("ts").to_pylist()) == [4] * len(IDS)


def test_a_clean_instant_changes_no_read_and_no_writer(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    history = _mor_history(t)
    before = snapshot(t)
    done = run_clean(t.storage, t.config, t.lock, CleanPolicy("keep_latest_commits", 2), dry_run=False)
    assert done is not None and snapshot(t) == before
    assert snapshot(t, as_of=done.requested_time) == before  # time travel to the clean itself
    t.upsert(rows([0, 11], 9))  # writes after a clean merge as usual
    assert compact(t) is not None
    expected = {r["id"]: r for r in before} | {r["id"]: r for r in rows([0, 11], 9).to_pylist()}
    assert snapshot(t) == [expected[k] for k in sorted(expected)]
    assert snapshot(t, as_of=history[-1].requested_time) == before
