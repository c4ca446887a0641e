"""Random sequences of upserts, deletes, compactions and clusterings (some planned while a write is
in flight, committed before or after the clustering runs), on merge-on-read and copy-on-write tables,
against a plain-Python model of event-time ordering: every snapshot and every time-travel read must
equal the model. Under OCC a copy-on-write write and a clustering of the same file group never both
commit: a losing clustering is simply dropped, a losing write is retried, and nothing is lost."""

import tempfile

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore import Table
from lakecore.errors import ClusteringConflict, WriteConflict
from lakecore.services import ClusteringStrategy, run_clustering, schedule_clustering
from tests.lakecore.event_time_model import apply
from tests.lakecore.services.conftest import HeldBaseWrite, HeldWrite, compact
from tests.lakecore.services.test_compaction_matches_reference_model import (
    SCHEMA,
    batches,
    read,
    record,
    snapshot,
)
from tests.lakecore.services.test_compaction_matches_reference_model import deletion as deletion_rows

STRATEGIES = [ClusteringStrategy("all", ("v",), row_group_rows=2),
              ClusteringStrategy("small_files", ("ts", "k")),
              ClusteringStrategy("all", (), max_groups=1),
              ClusteringStrategy("small_files", ("v",), 1, 2)]
strategy = st.sampled_from(STRATEGIES)
step = st.one_of(
    st.tuples(st.just("upsert"), st.lists(record, min_size=1, max_size=6), st.none()),
    st.tuples(st.just("delete"), st.lists(deletion_rows, min_size=1, max_size=4), st.none()),
    st.tuples(st.just("compact"), st.just([]), st.none()),
    st.tuples(st.just("cluster"), st.just([]), strategy),
    st.tuples(st.sampled_from(["upsert_commit_before_clustering", "upsert_commit_after_clustering"]),
              st.lists(record, min_size=1, max_size=6), strategy),
)


def _across(t: Table, batch: pa.Table, chosen: ClusteringStrategy, commit_first: bool) -> str:
    """One upsert in flight while a clustering is planned; returns the instant that holds its rows."""
    cow = t.config.table_type == "copy_on_write"
    held = HeldBaseWrite(t, batch) if cow else HeldWrite(t, batch)
    plan = schedule_clustering(t.storage, t.config, t.lock, chosen)
    if commit_first:
        instant = held.commit().requested_time
        if plan is not None:
            try:
                run_clustering(t.storage, t.config, t.lock, plan)
            except ClusteringConflict:
                assert cow, "a merge-on-read log append aborted a clustering"
        return instant
    if plan is not None:
        run_clustering(t.storage, t.config, t.lock, plan)
    try:
        return held.commit().requested_time
    except WriteConflict:
        assert cow, "a clustering aborted a merge-on-read log append"
        return t.upsert(batch).instant.requested_time   # the retry


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["merge_on_read", "copy_on_write"]), st.lists(step, min_size=1, max_size=8))
def test_snapshots_and_time_travel_match_the_model_across_clusterings(table_type, steps):
    with tempfile.TemporaryDirectory() as d:
        t = Table.create(f"{d}/t", schema=SCHEMA, record_key="k", partition_fields=["p"], ordering_field="ts",
                         buckets=2, table_type=table_type)
        model: dict = {}
        history = []
        for op, rows, chosen in steps:
            if op == "compact":
                if table_type == "merge_on_read":
                    compact(t)
                continue
            if op == "cluster":
                plan = schedule_clustering(t.storage, t.config, t.lock, chosen)
                if plan is not None:
                    run_clustering(t.storage, t.config, t.lock, plan)
                assert read(t) == snapshot(model)
                continue
            for sub, batch in batches("delete" if op == "delete" else "upsert", rows):
                if op.startswith("upsert_commit"):
                    instant = _across(t, batch, chosen, op == "upsert_commit_before_clustering")
                else:
                    instant = t.write(batch, op).instant.requested_time  # type: ignore[arg-type]
                apply(model, "delete" if op == "delete" else "upsert", sub)
                history.append((instant, snapshot(model)))
            assert read(t) == snapshot(model)
        assert not t.timeline().pending
        for instant_time, expected in history:
            assert read(t, as_of=instant_time) == expected
