"""Random sequences of upserts, deletes and compactions (some planned while a write is in flight)
against a plain-Python model of event-time ordering: every snapshot and every time-travel read must
equal the model's state at that point, however the slices were compacted."""

import tempfile

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore import Table
from lakecore.services import run_compaction, schedule_compaction
from tests.lakecore.event_time_model import apply, live
from tests.lakecore.services.conftest import HeldWrite, compact

SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def part(k: int) -> str:
    return f"p{k % 2}"


record = st.tuples(st.integers(0, 9), st.integers(0, 5), st.text("abc", min_size=1, max_size=3))
deletion = st.tuples(st.integers(0, 9), st.one_of(st.none(), st.integers(0, 5)))
step = st.one_of(
    st.tuples(st.just("upsert"), st.lists(record, min_size=1, max_size=6)),
    st.tuples(st.just("delete"), st.lists(deletion, min_size=1, max_size=4)),
    st.tuples(st.just("compact"), st.just([])),
    st.tuples(st.just("upsert_across_compaction"), st.lists(record, min_size=1, max_size=6)),
)


def snapshot(model: dict) -> dict:
    return {k: (part(k), ts, v) for k, (ts, v) in live(model).items()}


def batches(op: str, rows: list) -> list[tuple[list, pa.Table]]:
    if op == "delete":
        out = []
        for timed in (False, True):
            g = [r for r in rows if (r[1] is not None) == timed]
            if g:
                cols = {"k": pa.array([r[0] for r in g], pa.int64()), "p": [part(r[0]) for r in g]}
                if timed:
                    cols["ts"] = pa.array([r[1] for r in g], pa.int64())
                out.append((g, pa.table(cols)))
        return out
    return [(rows, pa.table({"k": pa.array([r[0] for r in rows], pa.int64()), "p": [part(r[0]) for r in rows],
                             "ts": pa.array([r[1] for r in rows], pa.int64()), "v": [r[2] for r in rows]}))]


def read(table: Table, **kw) -> dict:
    return {r["k"]: (r["p"], r["ts"], r["v"]) for r in table.read(**kw).to_pylist()}


@settings(max_examples=30, deadline=None)
@given(st.lists(step, min_size=1, max_size=8))
def test_snapshots_and_time_travel_match_the_model_across_compactions(steps):
    with tempfile.TemporaryDirectory() as d:
        t = Table.create(f"{d}/t", schema=SCHEMA, record_key="k", partition_fields=["p"], ordering_field="ts",
                         buckets=2)
        model: dict = {}
        history = []
        for op, rows in steps:
            if op == "compact":
                compact(t)
                continue
            for sub, batch in batches("upsert" if op != "delete" else "delete", rows):
                if op == "upsert_across_compaction":
                    held = HeldWrite(t, batch)
                    plan = schedule_compaction(t.storage, t.config, t.lock)
                    instant = held.commit()
                    if plan is not None:
                        run_compaction(t.storage, t.config, t.lock, plan)
                else:
                    instant = t.write(batch, op).instant  # type: ignore[arg-type]
                apply(model, op, sub)
                history.append((instant.requested_time, snapshot(model)))
            assert read(t) == snapshot(model)
        for instant_time, expected in history:
            assert read(t, as_of=instant_time) == expected
