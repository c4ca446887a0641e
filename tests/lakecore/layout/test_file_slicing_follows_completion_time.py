"""Completion-time file slicing, checked against a brute-force model with hypothesis."""

from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.layout import LogFile, build_view, slice_logs
from lakecore.timeline import CommitMetadata, Instant, State, Timeline, WriteStat


def _log(t: str, c: str) -> LogFile:
    return LogFile(WriteStat("", "00000000", f".00000000_{t}.log.1_0-0-0", "log", 1), t, c)


def brute_force_slice(bases: list[str], log: LogFile) -> str | None:
    """The newest base instant <= the log's completion time, by scanning every base."""
    best = None
    for b in bases:
        if b <= log.completion_time and (best is None or b > best):
            best = b
    return best


times = st.integers(10, 99).map(lambda n: f"202611220000000{n:02d}")


@settings(max_examples=300, deadline=None)
@given(st.lists(times, max_size=5, unique=True),
       st.lists(st.tuples(times, st.integers(0, 30)), max_size=8, unique_by=lambda x: x[0]))
def test_each_log_lands_in_the_newest_slice_whose_base_is_not_after_its_completion(bases, logs):
    files = [_log(t, f"202611220000001{min(99, int(t[-2:]) + d):02d}"[-17:]) for t, d in logs]
    sliced = slice_logs(bases, files)
    for base, members in sliced.items():
        for lf in members:
            assert brute_force_slice(bases, lf) == base
    assert sum(len(v) for v in sliced.values()) == len(files)
    for members in sliced.values():  # completion order inside a slice
        assert [m.completion_time for m in members] == sorted(m.completion_time for m in members)


def test_rfc_example_log_written_before_compaction_but_completed_after_joins_the_new_slice():
    # base t10; l1 [t21,t40]; l2 [t30,t50]; compaction base t60 completes t80; l3 [t35,t90]
    t = "2026112200000000"
    meta = {
        f"{t}10": CommitMetadata("bulk_insert", (WriteStat("", "fg", f"fg_0-0-0_{t}10.parquet", "base", 1),)),
        f"{t}21": CommitMetadata("upsert", (WriteStat("", "fg", "l1", "log", 1),)),
        f"{t}30": CommitMetadata("upsert", (WriteStat("", "fg", "l2", "log", 1),)),
        f"{t}35": CommitMetadata("upsert", (WriteStat("", "fg", "l3", "log", 1),)),
        f"{t}60": CommitMetadata("compaction", (WriteStat("", "fg", f"fg_0-0-0_{t}60.parquet", "base", 1),)),
    }
    done = {"10": "20", "21": "40", "30": "50", "35": "90", "60": "80"}
    tl = Timeline.of(Instant(f"{t}{r}", "deltacommit", State.COMPLETED, f"{t}{c}") for r, c in done.items())
    view = build_view(tl, lambda i: meta[i.requested_time])
    (fs,) = view.slices
    assert fs.base_instant == f"{t}60"
    assert [lf.stat.file_name for lf in fs.logs] == ["l3"]
    # as of t85 (before l3 completed) the new slice has no logs; as of t45 only the old slice exists
    (fs85,) = build_view(tl.as_of(f"{t}85"), lambda i: meta[i.requested_time]).slices
    assert fs85.base_instant == f"{t}60" and fs85.logs == ()
    (fs45,) = build_view(tl.as_of(f"{t}45"), lambda i: meta[i.requested_time]).slices
    assert fs45.base_instant == f"{t}10" and [lf.stat.file_name for lf in fs45.logs] == ["l1"]


def test_pending_instants_contribute_no_files():
    t = "2026112200000000"
    tl = Timeline.of([Instant(f"{t}10", "deltacommit", State.INFLIGHT)])
    assert build_view(tl, lambda i: (_ for _ in ()).throw(AssertionError("read"))).slices == ()
