"""Property: random sequences of writes, compactions, clusterings, cleans and archivals (a small
policy, so the history grows levels and merges them) against a plain dict model. The latest
snapshot, time travel to every write (archived or active) and incremental reads between consecutive
writes must equal the model; a time-travel point a clean made unreadable must fail with
FilesCleaned, never read wrong."""

import tempfile

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from lakecore import Table
from lakecore.errors import FilesCleaned
from lakecore.services import ArchivalPolicy, CleanPolicy, ClusteringStrategy, check_readable, run_clean
from tests.lakecore.services.conftest import SCHEMA, compact, keys, rows

IDS = st.lists(st.integers(0, 11), min_size=1, max_size=6, unique=True)
OPS = st.lists(st.one_of(
    st.tuples(st.just("upsert"), IDS),
    st.tuples(st.just("upsert"), IDS),
    st.tuples(st.just("delete"), IDS),
    st.tuples(st.just("compact"), st.just([])),
    st.tuples(st.just("cluster"), st.just([])),
    st.tuples(st.just("clean"), st.integers(1, 4)),
    st.tuples(st.just("archive"), st.just([])),
    st.tuples(st.just("archive"), st.just([])),
), min_size=10, max_size=30)
POLICY = ArchivalPolicy(min_instants=2, max_instants=3, fanout=2)


def _rows(t, **kw):
    return {r["id"]: (r["ts"], r["name"]) for r in t.read(**kw).to_pylist()}


def _changes(t, start, end):
    return {r["id"]: (r["_weir_op"], r["ts"] if r["_weir_op"] == "upsert" else None)
            for r in t.read_changes(start, end).to_pylist()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_type=st.sampled_from(["merge_on_read", "copy_on_write"]), ops=OPS)
def test_reads_across_the_archived_timeline_match_the_model(table_type, ops):
    with tempfile.TemporaryDirectory() as tmp:
        t = Table.create(f"{tmp}/t", schema=SCHEMA, record_key="id", buckets=2, table_type=table_type)
        model: dict[int, tuple[int, str]] = {}
        writes: list[tuple[str, dict[int, tuple[int, str]], dict]] = []  # (instant, model, its changes)
        for step, (op, arg) in enumerate(ops, start=1):
            if op == "upsert":
                data = rows(arg, step)
                instant = t.upsert(data).instant
                model |= {r["id"]: (r["ts"], r["name"]) for r in data.to_pylist()}
                writes.append((instant.requested_time, dict(model),
                               {r["id"]: ("upsert", step) for r in data.to_pylist()}))
            elif op == "delete":
                instant = t.delete(keys(arg)).instant
                gone = {k: ("delete", k in model) for k in arg}  # (op, whether the key was live)
                model = {k: v for k, v in model.items() if k not in arg}
                writes.append((instant.requested_time, dict(model), gone))
            elif op == "compact" and table_type == "merge_on_read":
                compact(t)
            elif op == "cluster":
                t.maintenance.cluster(ClusteringStrategy("all", sort_columns=("name",)))
            elif op == "clean":
                assert isinstance(arg, int)
                run_clean(t.storage, t.config, t.lock, CleanPolicy("keep_latest_commits", arg), dry_run=False)
            elif op == "archive":
                done = t.maintenance.archive(POLICY).archived
                event("archived" if done is not None else "nothing to archive")
            assert _rows(t) == model, (step, op)  # the snapshot after every step
        reopened = Table.open(t.uri)
        assert reopened.schema == t.schema
        timeline = t.timeline()
        if any(f.level > 0 for f in timeline.archived.manifest.files):
            event("the history merged level-0 files")
        assert timeline.total >= len(writes)
        previous = "19700101000000000"
        for instant, expected, changed in writes:
            try:
                check_readable(t.storage, timeline, instant)
            except FilesCleaned:
                previous = instant
                continue
            assert _rows(reopened, as_of=instant) == expected
            if instant <= timeline.archived.boundary:
                event("time travel into the archived range")
            # what changed in (previous write, this write]; a delete of an absent key may show or not
            got = _changes(reopened, previous, instant)
            assert {k: v for k, v in got.items() if v[0] == "upsert"} == \
                {k: v for k, v in changed.items() if v[0] == "upsert"}
            deleted = {k for k, v in got.items() if v[0] == "delete"}
            assert {k for k, v in changed.items() if v == ("delete", True)} <= deleted
            assert deleted <= {k for k, v in changed.items() if v[0] == "delete"}
            previous = instant
