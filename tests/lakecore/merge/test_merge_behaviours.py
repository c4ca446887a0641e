"""The merge behaviours a table user relies on, one named case each."""

from __future__ import annotations

import itertools
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from lakecore.merge import OP_COLUMN, GroupSpec, MergeSpec, merge, precombine

EVENT = MergeSpec(key=("k",), groups=(GroupSpec("all", ("ts", "v"), "ts"),))
EVENT_SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
COMMIT = MergeSpec(key=("k",), groups=(GroupSpec("all", ("v",), None),))
COMMIT_SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
TWO = MergeSpec(
    key=("k",), groups=(GroupSpec("g", ("a",), "_ord_g"), GroupSpec("h", ("b",), "_ord_h"))
)
TWO_SCHEMA = pa.schema([
    ("k", pa.int64()),
    ("a", pa.string()),
    ("b", pa.string()),
    ("_ord_g", pa.int64()),
    ("_ord_h", pa.int64()),
])


def changes(schema: pa.Schema, *rows: dict[str, Any]) -> pa.Table:
    """A change batch of `rows`; a row with "op" set is a delete or upsert explicitly."""
    names = [f.name for f in schema if any(f.name in r for r in rows)]
    table = pa.table({n: pa.array([r.get(n) for r in rows], type=schema.field(n).type) for n in names})
    if any("op" in r for r in rows):
        table = table.append_column(OP_COLUMN, pa.array([r.get("op", 0) for r in rows], type=pa.int8()))
    return table


def snapshot(batches: list[pa.Table], spec: MergeSpec, schema: pa.Schema) -> list[dict[str, Any]]:
    """The merge by both paths, which must agree, as rows sorted by key."""
    general = merge(batches, spec, schema).to_pylist()
    if batches and len({r["k"] for r in batches[0].to_pylist()}) == batches[0].num_rows:
        based = merge(batches, spec, schema, first_unique=True).to_pylist()
        assert sorted(based, key=lambda r: r["k"]) == sorted(general, key=lambda r: r["k"])
    return sorted(general, key=lambda r: r["k"])


def test_an_older_event_never_overwrites_a_newer_one_in_any_arrival_order() -> None:
    events = [changes(EVENT_SCHEMA, {"k": 1, "ts": ts, "v": f"at {ts}"}) for ts in (1, 2, 3, 4)]
    for arrival in itertools.permutations(events):
        assert snapshot(list(arrival), EVENT, EVENT_SCHEMA) == [{"k": 1, "ts": 4, "v": "at 4"}]


def test_a_delete_older_than_the_live_row_is_ignored_under_event_time() -> None:
    live = changes(EVENT_SCHEMA, {"k": 1, "ts": 5, "v": "live"})
    older_delete = changes(EVENT_SCHEMA, {"k": 1, "ts": 3, "op": 1})
    newer_delete = changes(EVENT_SCHEMA, {"k": 1, "ts": 7, "op": 1})
    assert snapshot([live, older_delete], EVENT, EVENT_SCHEMA) == [{"k": 1, "ts": 5, "v": "live"}]
    assert snapshot([live, newer_delete], EVENT, EVENT_SCHEMA) == []


def test_a_key_only_delete_always_applies_and_a_later_record_resurrects_the_key() -> None:
    live = changes(EVENT_SCHEMA, {"k": 1, "ts": 9, "v": "old"})
    key_only = changes(EVENT_SCHEMA, {"k": 1, "op": 1})
    comeback = changes(EVENT_SCHEMA, {"k": 1, "ts": 1, "v": "back"})
    assert snapshot([live, key_only], EVENT, EVENT_SCHEMA) == []
    assert snapshot([live, key_only, comeback], EVENT, EVENT_SCHEMA) == [{"k": 1, "ts": 1, "v": "back"}]
    # The same within one write: precombining it must not lose the reset.
    one_write = changes(EVENT_SCHEMA, {"k": 1, "op": 1}, {"k": 1, "ts": 1, "v": "back", "op": 0})
    reduced = precombine(one_write, EVENT, EVENT_SCHEMA)
    assert snapshot([live, reduced], EVENT, EVENT_SCHEMA) == [{"k": 1, "ts": 1, "v": "back"}]


def test_commit_time_latest_batch_wins_including_deletes() -> None:
    first = changes(COMMIT_SCHEMA, {"k": 1, "v": "a"}, {"k": 2, "v": "a"})
    second = changes(COMMIT_SCHEMA, {"k": 1, "v": "b"}, {"k": 1, "v": "c"})  # later row wins
    delete = changes(COMMIT_SCHEMA, {"k": 2, "op": 1})
    assert snapshot([first, second], COMMIT, COMMIT_SCHEMA) == [{"k": 1, "v": "c"}, {"k": 2, "v": "a"}]
    assert snapshot([first, second, delete], COMMIT, COMMIT_SCHEMA) == [{"k": 1, "v": "c"}]
    again = changes(COMMIT_SCHEMA, {"k": 2, "v": "d"})
    assert snapshot([first, delete, again], COMMIT, COMMIT_SCHEMA) == [
        {"k": 1, "v": "a"},
        {"k": 2, "v": "d"},
    ]


def test_three_streams_owning_column_groups_out_of_order_equal_a_join_of_their_latest_values() -> None:
    rng = np.random.default_rng(7)
    spec = MergeSpec(
        key=("k",), groups=tuple(GroupSpec(f"g{i}", (f"c{i}",), f"_weir_ord__g{i}") for i in range(3))
    )
    schema = pa.schema(
        [("k", pa.int64())]
        + [(f"c{i}", pa.float64()) for i in range(3)]
        + [(f"_weir_ord__g{i}", pa.int64()) for i in range(3)]
    )
    writes = []
    for i in range(3):
        for _ in range(4):
            n = 300
            writes.append(
                (i, pa.table({
                    "k": rng.integers(0, 500, n),
                    f"c{i}": rng.random(n),
                    f"_weir_ord__g{i}": rng.integers(0, 50, n),  # ties on purpose
                }))
            )
    arrival = [writes[j] for j in rng.permutation(len(writes))]
    batches = [t for _, t in arrival]

    latest = []
    for i in range(3):
        stream = pd.concat([t.to_pandas() for s, t in arrival if s == i], ignore_index=True)
        stream["seq"] = np.arange(len(stream))  # arrival order breaks ties
        stream = stream.sort_values(["k", f"_weir_ord__g{i}", "seq"]).groupby("k").tail(1)
        latest.append(pa.Table.from_pandas(stream.drop(columns="seq"), preserve_index=False))
    joined = latest[0].join(latest[1], "k", join_type="full outer")
    expected = joined.join(latest[2], "k", join_type="full outer").select(schema.names).sort_by("k")

    assert merge(batches, spec, schema).sort_by("k").to_pylist() == expected.to_pylist()
    # As a reader sees it: a compacted base (unique keys) and the later logs.
    base = merge(batches[:6], spec, schema)
    result = merge([base, *batches[6:]], spec, schema, first_unique=True)
    assert result.sort_by("k").to_pylist() == expected.to_pylist()


def test_a_key_first_seen_through_one_group_has_the_other_groups_null() -> None:
    only_h = changes(TWO_SCHEMA, {"k": 1, "b": "bee", "_ord_h": 3})
    assert snapshot([only_h], TWO, TWO_SCHEMA) == [
        {"k": 1, "a": None, "b": "bee", "_ord_g": None, "_ord_h": 3}
    ]


def test_a_partial_row_leaves_the_groups_it_does_not_order_alone() -> None:
    full = changes(TWO_SCHEMA, {"k": 1, "a": "a1", "b": "b1", "_ord_g": 5, "_ord_h": 5})
    partial = changes(TWO_SCHEMA, {"k": 1, "a": "ignored", "b": "b2", "_ord_h": 6})
    assert snapshot([full, partial], TWO, TWO_SCHEMA) == [
        {"k": 1, "a": "a1", "b": "b2", "_ord_g": 5, "_ord_h": 6}
    ]


def test_a_group_deleted_while_another_lives_stays_deleted_at_its_ordering() -> None:
    # g is deleted at 10; h lives on at 5. A later delete at g=3, h=6 kills h and must not revive g.
    history = [
        changes(TWO_SCHEMA, {"k": 1, "_ord_g": 10, "_ord_h": 1, "op": 1}),
        changes(TWO_SCHEMA, {"k": 1, "b": "b5", "_ord_h": 5}),
    ]
    later = changes(TWO_SCHEMA, {"k": 1, "_ord_g": 3, "_ord_h": 6, "op": 1})
    assert snapshot(history, TWO, TWO_SCHEMA) == [{"k": 1, "a": None, "b": "b5", "_ord_g": 10, "_ord_h": 5}]
    assert snapshot([*history, later], TWO, TWO_SCHEMA) == []
    reduced = merge(history, TWO, TWO_SCHEMA, keep_deletes=True)
    assert reduced.column(OP_COLUMN).to_pylist() == [1, 0], "one row cannot hold both groups' states"
    assert snapshot([reduced, later], TWO, TWO_SCHEMA) == []


def test_a_reset_marker_forgets_only_the_groups_behind_a_key_only_delete() -> None:
    older = changes(TWO_SCHEMA, {"k": 1, "b": "b9", "_ord_h": 9})
    # Key-only for g (null ordering), ordered for h (2 < 9): g restarts, h keeps the older value.
    write = changes(TWO_SCHEMA, {"k": 1, "_ord_h": 2, "op": 1}, {"k": 1, "a": "a1", "_ord_g": 1, "op": 0})
    expected = [{"k": 1, "a": "a1", "b": "b9", "_ord_g": 1, "_ord_h": 9}]
    assert snapshot([older, write], TWO, TWO_SCHEMA) == expected
    assert snapshot([older, precombine(write, TWO, TWO_SCHEMA)], TWO, TWO_SCHEMA) == expected


def test_precombine_keeps_the_highest_ordering_and_ties_go_to_the_later_row() -> None:
    write = changes(
        EVENT_SCHEMA,
        {"k": 1, "ts": 5, "v": "first 5"},
        {"k": 1, "ts": 7, "v": "first 7"},
        {"k": 1, "ts": 7, "v": "second 7"},
        {"k": 1, "ts": 6, "v": "6"},
        {"k": 2, "ts": 1, "v": "only"},
    )
    result = precombine(write, EVENT, EVENT_SCHEMA).sort_by("k").to_pylist()
    assert result == [
        {"k": 1, "ts": 7, "v": "second 7", OP_COLUMN: 0},
        {"k": 2, "ts": 1, "v": "only", OP_COLUMN: 0},
    ]


def test_precombine_leaves_out_commit_time_groups_the_write_does_not_have() -> None:
    spec = MergeSpec(key=("k",), groups=(GroupSpec("g", ("a",), None), GroupSpec("h", ("b",), None)))
    schema = pa.schema([("k", pa.int64()), ("a", pa.string()), ("b", pa.string())])
    older = pa.table({"k": [1], "a": ["a0"], "b": ["b0"]})
    write = pa.table({"k": [1, 1], "a": ["a1", "a2"]})
    reduced = precombine(write, spec, schema)
    assert reduced.column_names == ["k", "a", OP_COLUMN]
    assert merge([older, reduced], spec, schema).to_pylist() == [{"k": 1, "a": "a2", "b": "b0"}]
    assert merge([older, write], spec, schema).to_pylist() == [{"k": 1, "a": "a2", "b": "b0"}]


def test_batches_are_conformed_to_the_schema() -> None:
    # Columns in another order, a narrower type, an extra column, a missing one.
    batch = pa.table({
        "v": ["x"], "extra": [1], "k": pa.array([1], pa.int32()), "ts": pa.array([3], pa.int32())
    })
    result = merge([batch], EVENT, EVENT_SCHEMA, keep_deletes=True)
    assert result.schema == EVENT_SCHEMA.append(pa.field(OP_COLUMN, pa.int8()))
    assert result.to_pylist() == [{"k": 1, "ts": 3, "v": "x", OP_COLUMN: 0}]
    missing = pa.table({"k": [2], "ts": [1]})
    assert merge([missing], EVENT, EVENT_SCHEMA).to_pylist() == [{"k": 2, "ts": 1, "v": None}]


def test_nothing_to_merge_gives_an_empty_table_of_the_schema() -> None:
    assert merge([], EVENT, EVENT_SCHEMA).schema == EVENT_SCHEMA
    assert merge([], EVENT, EVENT_SCHEMA).num_rows == 0
    empty = EVENT_SCHEMA.empty_table()
    assert merge([empty, empty], EVENT, EVENT_SCHEMA, first_unique=True).num_rows == 0


@pytest.mark.parametrize(
    ("kind", "low", "high", "mid"),
    [
        (pa.timestamp("us"), datetime(2026, 1, 1), datetime(2026, 1, 3), datetime(2026, 1, 2)),
        (pa.date32(), date(2026, 1, 1), date(2026, 1, 3), date(2026, 1, 2)),
        (pa.float64(), -0.5, 2.5, 1.5),
        (pa.string(), "apple", "cherry", "banana"),
        (pa.decimal128(9, 2), Decimal("0.10"), Decimal("2.00"), Decimal("1.50")),
    ],
)
def test_ordering_values_of_any_orderable_type_pick_the_greatest(
    kind: pa.DataType, low: Any, high: Any, mid: Any
) -> None:
    schema = pa.schema([("k", pa.int64()), ("ts", kind), ("v", pa.string())])
    older = pa.table({"k": [1], "ts": pa.array([high], kind), "v": ["older"]})
    newer = pa.table({"k": [1, 1, 1], "ts": pa.array([low, high, mid], kind), "v": ["low", "tie", "mid"]})
    for first_unique in (False, True):
        result = merge([older, newer], EVENT, schema, first_unique=first_unique).to_pylist()
        assert [r["v"] for r in result] == ["tie"]
