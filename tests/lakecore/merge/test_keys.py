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


_INT64 = st.one_of(st.integers(-(1 << 63), (1 << 63) - 1), st.integers(-20, 20),
                   st.sampled_from([-(1 << 63), -(1 << 63) + 1, (1 << 63) - 2, (1 << 63) - 1]))


@settings(max_examples=200, deadline=None)
@given(st.lists(_INT64, max_size=40), st.lists(st.integers(-20, 20), min_size=1, max_size=20),
       st.sampled_from([0, (1 << 63) - 30, -(1 << 63) + 30]), st.sampled_from(["table", "bitmap", "hash"]))
def test_probe_finds_integer_keys_by_every_path_even_at_the_ends_of_int64(
    rows: list[int], wanted: list[int], shift: int, path: str
) -> None:
    """Rows far outside the keys' span (their difference to it wraps around int64) are never found,
    and keys at either end of the span, on any bit of the bitmap's bytes, always are."""
    distinct = list(dict.fromkeys(w + shift for w in wanted))
    rows = rows + distinct[::2]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(keys, "_TABLE_SPAN", {"table": 1 << 62, "bitmap": 0, "hash": 0}[path])
        patch.setattr(keys, "_BITMAP_SPAN", 0 if path == "hash" else 1 << 62)
        found = probe([pa.chunked_array([pa.array(rows, pa.int64())])], [pa.array(distinct, pa.int64())])
    assert found.tolist() == [distinct.index(r) if r in distinct else -1 for r in rows]
