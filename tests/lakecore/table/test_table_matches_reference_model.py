"""Random sequences of upserts, inserts and deletes against a plain-Python model of event-time
ordering; every snapshot and every time-travel read must equal the model's state at that point."""

import tempfile

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore import Table
from tests.lakecore.event_time_model import apply, live

SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def part(k: int) -> str:
    return f"p{k % 3}"


record = st.tuples(st.integers(0, 12), st.integers(0, 5), st.text("abc", min_size=1, max_size=3))
deletion = st.tuples(st.integers(0, 12), st.one_of(st.none(), st.integers(0, 5)))
write = st.one_of(
    st.tuples(st.sampled_from(["upsert", "insert", "bulk_insert"]), st.lists(record, min_size=1, max_size=8)),
    st.tuples(st.just("delete"), st.lists(deletion, min_size=1, max_size=5)),
)


def snapshot(model: dict) -> dict:
    return {k: (part(k), ts, v) for k, (ts, v) in live(model).items()}


def to_arrow(op: str, rows: list) -> pa.Table:
    if op == "delete":
        keyed = [r for r in rows if r[1] is None]
        timed = [r for r in rows if r[1] is not None]
        return [pa.table({"k": pa.array([r[0] for r in g], pa.int64()),
                          "p": [part(r[0]) for r in g],
                          **({"ts": pa.array([r[1] for r in g], pa.int64())} if g is timed else {})})
                for g in (keyed, timed) if g]
    return [pa.table({"k": pa.array([r[0] for r in rows], pa.int64()), "p": [part(r[0]) for r in rows],
                      "ts": pa.array([r[1] for r in rows], pa.int64()), "v": [r[2] for r in rows]})]


def read(table: Table, **kw) -> dict:
    return {r["k"]: (r["p"], r["ts"], r["v"]) for r in table.read(**kw).to_pylist()}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["merge_on_read", "copy_on_write"]), st.lists(write, min_size=1, max_size=6))
def test_snapshots_and_time_travel_match_the_model(table_type, writes):
    with tempfile.TemporaryDirectory() as d:
        t = Table.create(f"{d}/t", schema=SCHEMA, record_key="k", partition_fields=["p"], ordering_field="ts",
                         table_type=table_type, buckets=2)
        model: dict = {}
        history = []
        for op, rows in writes:
            for batch in to_arrow(op, rows):
                timed = "ts" in batch.column_names
                sub = rows if op != "delete" else [r for r in rows if (r[1] is not None) == timed]
                instant = t.write(batch, op).instant
                apply(model, op, sub)
                history.append((instant.requested_time, snapshot(model)))
        assert read(t) == snapshot(model)
        for instant_time, expected in history:
            assert read(t, as_of=instant_time) == expected
