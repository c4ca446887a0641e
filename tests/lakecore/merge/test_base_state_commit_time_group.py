"""Regression (hypothesis falsifying example, notes/merge-falsifying.txt): a base state must not make a
commit-time group that no row carried look carried.

Key 2 is written only through event-time group g0; commit-time group g1 is never written. A later
row deletes g0 alone (`_weir_op__g0` = 1), so every group of key 2 is deleted or absent and the key
disappears. The base state of the first batches holds g1's column (null), and a batch with a
commit-time group's column carries that group: read back, the base row used to carry g1 as an
upsert of nulls and kept key 2 alive with every group column null.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore.merge import OP_COLUMN, GroupSpec, MergeSpec, merge, merge_to_base
from tests.lakecore.merge.strategies import collapse, rows

SPEC = MergeSpec(
    key=("k",),
    groups=(GroupSpec("g0", ("g0_a", "g0_b", "g0_ts"), "g0_ts"), GroupSpec("g1", ("g1_a",), None)),
)
SCHEMA = pa.schema([("k", pa.int64()), ("g0_a", pa.int64()), ("g0_b", pa.string()),
                    ("g0_ts", pa.int64()), ("g1_a", pa.int64()), ("u", pa.int64())])
I64 = pa.int64()
I8 = pa.int8()


def _batches() -> list[pa.Table]:
    empty = pa.table({**{f.name: pa.array([], f.type) for f in SCHEMA}, OP_COLUMN: pa.array([], I8)})
    g0_only = pa.table({
        "k": pa.array([2, 0], I64), "g0_a": pa.array([None, None], I64), "g0_ts": pa.array([0, None], I64),
        "u": pa.array([None, None], I64), OP_COLUMN: pa.array([0, 0], I8),
    })
    deletes_g0 = pa.table({
        "k": pa.array([0, 0, 0, 0, 2, 0], I64), "g0_a": pa.array([None] * 6, I64),
        OP_COLUMN: pa.array([0] * 6, I8), "_weir_op__g0": pa.array([None, None, None, None, 1, None], I8),
    })
    return [empty, g0_only, deletes_g0]


def test_the_whole_history_leaves_no_row() -> None:
    assert merge(_batches(), SPEC, SCHEMA).num_rows == 0


def test_a_base_state_keeps_an_unwritten_commit_time_group_unwritten() -> None:
    batches = _batches()
    base = merge_to_base(batches[:2], SPEC, SCHEMA)
    assert base.column("k").to_pylist() == [2]
    assert base.column(OP_COLUMN).to_pylist() == [0]
    whole = merge(batches, SPEC, SCHEMA)
    whole_kept = merge(batches, SPEC, SCHEMA, keep_deletes=True)
    for first_unique in (False, True):
        replaced = [base, *batches[2:]]
        result = merge(replaced, SPEC, SCHEMA, first_unique=first_unique)
        assert rows(result, SPEC.key) == rows(whole, SPEC.key) == []
        kept = merge(replaced, SPEC, SCHEMA, keep_deletes=True, first_unique=first_unique)
        assert collapse(kept, SPEC) == collapse(whole_kept, SPEC)


@pytest.mark.parametrize("first_unique", [False, True])
def test_a_later_commit_time_write_still_revives_the_key(first_unique: bool) -> None:
    batches = _batches()
    base = merge_to_base(batches[:2], SPEC, SCHEMA)
    g1 = pa.table({"k": pa.array([2], I64), "g1_a": pa.array([7], I64)})
    expected = rows(merge([*batches, g1], SPEC, SCHEMA), SPEC.key)
    assert [(r["k"], r["g1_a"], r["g0_ts"]) for r in expected] == [(2, 7, None)]
    result = merge([base, batches[2], g1], SPEC, SCHEMA, first_unique=first_unique)
    assert rows(result, SPEC.key) == expected
