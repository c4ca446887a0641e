"""Record keys become integers that are equal exactly when the keys are, for one or many columns."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.merge import keys
from lakecore.merge.keys import key_codes, probe

_tuples = st.lists(st.tuples(st.integers(-3, 3), st.sampled_from(["a", "b", ""]), st.booleans()), max_size=30)


@settings(max_examples=100, deadline=None)
@given(_tuples, st.booleans())
def test_codes_are_dense_and_equal_iff_the_keys_are(rows: list[tuple[int, str, bool]], tight: bool) -> None:
    with pytest.MonkeyPatch.context() as patch:
        if tight:  # force the re-numbering that keeps mixed-radix codes from overflowing
            patch.setattr(keys, "_CODE_LIMIT", 4)
        columns = [pa.chunked_array([pa.array([r[i] for r in rows])]) for i in range(3)]
        codes, n = key_codes(columns)
    assert n == len(set(rows))
    assert sorted(set(codes.tolist())) == list(range(n))
    first: dict[tuple[int, str, bool], int] = {}
    for row, code in zip(rows, codes.tolist(), strict=True):
        assert first.setdefault(row, code) == code


@settings(max_examples=100, deadline=None)
@given(_tuples, _tuples, st.booleans())
def test_probe_finds_each_row_key_among_the_distinct_keys(
    rows: list[tuple[int, str, bool]], wanted: list[tuple[int, str, bool]], tight: bool
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        if tight:
            patch.setattr(keys, "_CODE_LIMIT", 4)
        for width in (1, 2, 3):
            distinct = list(dict.fromkeys(w[:width] for w in wanted))
            columns = [pa.chunked_array([pa.array([r[i] for r in rows], _type(i))]) for i in range(width)]
            key_side = [pa.array([d[i] for d in distinct], type=_type(i)) for i in range(width)]
            found = probe(columns, key_side)
            expected = [distinct.index(r[:width]) if r[:width] in distinct else -1 for r in rows]
            assert found.tolist() == expected
            assert found.dtype == np.int64


def _type(i: int) -> pa.DataType:
    return [pa.int64(), pa.string(), pa.bool_()][i]


_spread = st.sampled_from([1, 7, 40, 1_000, 1 << 40])  # dense, table-wide, bitmap-wide, sparse spans


@settings(max_examples=100, deadline=None)
@given(_tuples, _spread)
def test_keys_are_unique_iff_no_two_rows_share_one(rows: list[tuple[int, str, bool]], spread: int) -> None:
    for width in (1, 2, 3):
        keyed = [(r[0] * spread, *r[1:width]) for r in rows]
        columns = [pa.chunked_array([pa.array([r[i] for r in keyed], _type(i))]) for i in range(width)]
        assert keys.unique(columns) == (len(set(keyed)) == len(keyed))
    strings = pa.chunked_array([pa.array([r[1] for r in rows])])
    assert keys.unique([strings]) == (len({r[1] for r in rows}) == len(rows))


def test_a_null_key_is_never_unique() -> None:
    assert not keys.unique([pa.chunked_array([pa.array([1, None], pa.int64())])])


@settings(max_examples=100, deadline=None)
@given(_tuples, _tuples, _spread)
def test_probe_finds_integer_keys_however_widely_spread(
    rows: list[tuple[int, str, bool]], wanted: list[tuple[int, str, bool]], spread: int
) -> None:
    distinct = list(dict.fromkeys(w[0] * spread for w in wanted))
    found = probe([pa.chunked_array([pa.array([r[0] * spread for r in rows], pa.int64())])],
                  [pa.array(distinct, pa.int64())])
    expected = [distinct.index(r[0] * spread) if r[0] * spread in distinct else -1 for r in rows]
    assert found.tolist() == expected
