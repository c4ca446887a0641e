"""A base read as several chunks (a file of several row groups) merges like one: later rows that
update, delete or lose to the first and last rows of each chunk, by every way the base keys are
looked up (a table of positions, a bitmap, a hash: dense, spread and sparse keys), give the
reference result, and the rows nothing touched come out as they were."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakecore.merge import OP_COLUMN, GroupSpec, MergeSpec, merge
from tests.lakecore.merge.reference import reference_merge

SPEC = MergeSpec(key=("k",), groups=(GroupSpec("all", ("ts", "v"), "ts"),))
SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
CHUNK = 50


def base(spread: int) -> pa.Table:
    """Four chunks of CHUNK rows, keys shuffled over a range `spread` times the rows."""
    rng = np.random.default_rng(spread)
    keys = rng.choice(4 * CHUNK * spread, 4 * CHUNK, replace=False) - 2 * CHUNK * spread
    chunks = [pa.table({"k": keys[i:i + CHUNK], "ts": np.full(CHUNK, 10),
                        "v": [f"base{k}" for k in keys[i:i + CHUNK]]}, schema=SCHEMA)
              for i in range(0, len(keys), CHUNK)]
    return pa.concat_tables(chunks)


def edits(first: pa.Table, spread: int) -> pa.Table:
    """Per chunk: its first row updated, its last deleted, its second updated with an older ts (it
    loses); and new keys beyond the base's on both sides."""
    keys = first.column("k").to_numpy()
    rows = []
    for start in range(0, len(keys), CHUNK):
        rows += [(keys[start], 11, "new", 0), (keys[start + CHUNK - 1], 12, None, 1),
                 (keys[start + 1], 9, "older", 0)]
    outside = int(np.abs(keys).max()) + 1 + spread
    rows += [(outside, 1, "fresh", 0), (-outside, 1, "fresh", 0)]
    k, ts, v, op = zip(*rows, strict=True)
    return pa.table({"k": pa.array(k, pa.int64()), "ts": pa.array(ts, pa.int64()),
                     "v": pa.array(v, pa.string()), OP_COLUMN: pa.array(op, pa.int8())})


@pytest.mark.parametrize("spread", [1, 20, 10_000])  # the table of positions, the bitmap, the hash
def test_edits_at_chunk_edges_merge_like_the_reference(spread: int) -> None:
    first = base(spread)
    assert first.column("k").num_chunks == 4
    later = edits(first, spread)
    got = merge([first, later], SPEC, SCHEMA, first_unique=True)
    assert got.sort_by("k").to_pylist() == reference_merge([first, later], SPEC, SCHEMA)
    # 4 chunks: 2 of 50 rows gone or replaced each (the loser stays), and 2 new keys
    assert got.num_rows == 4 * CHUNK - 4 + 2
    untouched = {r["k"]: r for r in first.to_pylist()}
    changed = set(later.column("k").to_pylist()) - set(first.column("k").to_pylist()[1::CHUNK])
    for row in got.to_pylist():
        if row["k"] in untouched and row["k"] not in changed:
            assert row == untouched[row["k"]]
