"""Property: after any sequence of writes, compactions and cleans (keep_latest_commits N), time travel
to every retained write reads what a plain dict model held after that write; an older point either
still reads correctly or fails with FilesCleaned — never a wrong answer."""

import tempfile

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lakecore import Table
from lakecore.errors import FilesCleaned
from lakecore.services import CleanPolicy, check_readable, run_clean
from tests.lakecore.services.conftest import SCHEMA, compact, keys, rows

IDS = st.lists(st.integers(0, 15), min_size=1, max_size=8, unique=True)
OPS = st.lists(st.one_of(
    st.tuples(st.just("upsert"), IDS),
    st.tuples(st.just("delete"), IDS),
    st.tuples(st.just("compact"), st.just([])),
    st.tuples(st.just("clean"), st.integers(1, 3)),
), min_size=1, max_size=12)


def _rows(t, **kw):
    return {r["id"]: (r["ts"], r["name"]) for r in t.read(**kw).to_pylist()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_type=st.sampled_from(["merge_on_read", "copy_on_write"]), ops=OPS)
def test_retained_time_travel_matches_the_model(table_type, ops):
    with tempfile.TemporaryDirectory() as tmp:
        t = Table.create(f"{tmp}/t", schema=SCHEMA, record_key="id", buckets=2, table_type=table_type)
        model: dict[int, tuple[int, str]] = {}
        writes: list[tuple[str, dict[int, tuple[int, str]]]] = []  # (instant, model after it)
        earliest = 0  # index in `writes` from which time travel must keep working
        for step, (op, arg) in enumerate(ops, start=1):
            if op == "upsert":
                data = rows(arg, step)
                t.upsert(data)
                model |= {r["id"]: (r["ts"], r["name"]) for r in data.to_pylist()}
                writes.append((t.timeline().completed[-1].requested_time, dict(model)))
            elif op == "delete":
                t.delete(keys(arg))
                model = {k: v for k, v in model.items() if k not in arg}
                writes.append((t.timeline().completed[-1].requested_time, dict(model)))
            elif op == "compact" and table_type == "merge_on_read":
                compact(t)
            elif op == "clean":
                assert isinstance(arg, int)
                done = run_clean(t.storage, t.config, t.lock, CleanPolicy("keep_latest_commits", arg),
                                 dry_run=False)
                event("a clean deleted files" if done is not None else "a clean found nothing")
                earliest = max(earliest, len(writes) - arg)
        assert _rows(t) == model
        timeline = t.timeline()
        for i, (instant, expected) in enumerate(writes):
            if i >= earliest:
                check_readable(t.storage, timeline, instant)
                assert _rows(t, as_of=instant) == expected
            else:
                try:
                    check_readable(t.storage, timeline, instant)
                except FilesCleaned:
                    continue
                assert _rows(t, as_of=instant) == expected
        assert not [i for i in timeline.pending if i.action == "clean"]
