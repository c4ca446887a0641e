"""Record keys reduced to integers.

Owns turning one or more key columns into dense int64 codes (equal codes iff equal keys) and
probing a large table's keys against a small set of distinct keys, without sorting the large
side: integers are addressed by value (a table or a bitmap over their span) where the span allows,
other keys hashed (Arrow's dictionary encoding and `index_in`). Must not know about column groups
or ops.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

IntArray = npt.NDArray[np.int64]

# Mixed-radix codes stay below this so that `code * radix + digit` cannot overflow int64.
_CODE_LIMIT = 1 << 62
# Integer keys spanning up to this many times the rows are marked in a bitmap (one bit per value
# of the span, so at most 8 bytes per row) rather than hashed: keys hashed into buckets span the
# whole key range, several times wider than one bucket's rows.
_BITMAP_SPAN = 64
# `unique` marks integers spanning up to this many times the rows in a bitmap of bytes (cheaper
# than a sort), and sorts wider ones.
_UNIQUE_SPAN = 8
# Up to this many times the rows, `probe` looks keys up in a table of int32 positions over the span
# (4 bytes per value) rather than a bitmap: one random read per row, where the bitmap needs a few
# more array passes and a hash of its hits, but the table outgrows the cache sooner (measured on
# 1M rows: the table is faster up to ~4x, the bitmap from ~8x: 7.5 against 9.6 ms).
_TABLE_SPAN = 6


def key_codes(columns: Sequence[pa.ChunkedArray]) -> tuple[IntArray, int]:
    """Dense codes in [0, n) for the rows' keys, and n, the number of distinct keys.

    Codes depend only on the keys and their order of appearance, so they are deterministic.
    """
    codes, size = _encode(columns[0])
    for column in columns[1:]:
        digit, radix = _encode(column)
        if size * max(radix, 1) >= _CODE_LIMIT:
            codes, size = _encode(pa.chunked_array([codes]))
        codes = codes * radix + digit
        size *= radix
    if len(columns) > 1:
        codes, size = _encode(pa.chunked_array([codes]))
    return codes, size


def unique(columns: Sequence[pa.ChunkedArray]) -> bool:
    """Whether no two rows have the same key (a null key counts as no key: False if there is one).

    Integers not much sparser than the rows are marked in a bitmap, other integers sorted (a few
    array passes either way); other keys are hashed.
    """
    n_rows = len(columns[0])
    if any(c.null_count for c in columns):
        return False
    if n_rows <= 1:
        return True
    if len(columns) == 1:
        if _addressable(columns[0].type):
            return _unique_integers(np.asarray(columns[0].to_numpy(), dtype=np.int64))
        return bool(pc.count_distinct(columns[0]).as_py() == n_rows)
    _, n_keys = key_codes(columns)
    return n_keys == n_rows


def _unique_integers(values: IntArray) -> bool:
    low, high = int(values.min()), int(values.max())
    if high - low >= _UNIQUE_SPAN * len(values):
        ordered = np.sort(values)
        return not bool((ordered[1:] == ordered[:-1]).any())
    seen = np.zeros(high - low + 1, dtype=np.bool_)
    seen[values - low] = True
    return int(np.count_nonzero(seen)) == len(values)


def probe(columns: Sequence[pa.ChunkedArray], keys: Sequence[pa.Array]) -> IntArray:
    """For each row of `columns`, the position of its key among `keys` (distinct), else -1."""
    rows, positions = matches(columns, keys)
    found: IntArray = np.full(len(columns[0]), -1, dtype=np.int64)
    found[rows] = positions
    return found


def matches(columns: Sequence[pa.ChunkedArray], keys: Sequence[pa.Array]) -> tuple[IntArray, IntArray]:
    """The rows of `columns` whose key is among `keys` (distinct), ascending, and the position of
    each one's key among `keys`: `probe` for the rows it finds, without an array over all the rows.

    Hashes only `keys` (the small side) and streams the rows through it.
    """
    if len(columns) == 1:
        found = _matches_dense(columns[0], keys[0])
        if found is not None:
            return found
        return _found(_positions(pc.index_in(columns[0], value_set=keys[0])))
    n_rows = len(columns[0])
    row_codes = np.zeros(n_rows, dtype=np.int64)
    key_side = np.zeros(len(keys[0]), dtype=np.int64)
    absent = np.zeros(n_rows, dtype=np.bool_)
    size = 1
    for column, key in zip(columns, keys, strict=True):
        dictionary = pc.unique(key)
        radix = len(dictionary)
        if size * max(radix, 1) >= _CODE_LIMIT:
            # Re-number the key tuples seen so far densely, on both sides alike.
            distinct = pa.array(np.unique(key_side))
            key_side = _positions(pc.index_in(pa.array(key_side), value_set=distinct))
            row_codes = _positions(pc.index_in(pa.array(row_codes), value_set=distinct))
            absent |= row_codes < 0
            size = len(distinct)
        digit = _positions(pc.index_in(column, value_set=dictionary))
        absent |= digit < 0
        row_codes = row_codes * radix + digit
        key_side = key_side * radix + _positions(pc.index_in(key, value_set=dictionary))
        size *= radix
    return _found(_positions(pc.index_in(pa.array(row_codes, mask=absent), value_set=pa.array(key_side))))


def _found(positions: npt.NDArray[np.int64] | npt.NDArray[np.int32]) -> tuple[IntArray, IntArray]:
    """`matches` from a position per row (-1: not found)."""
    rows = np.flatnonzero(positions >= 0)
    return rows, positions[rows].astype(np.int64)


def _matches_dense(column: pa.ChunkedArray, keys: pa.Array) -> tuple[IntArray, IntArray] | None:
    """`matches` by direct addressing, for integer keys spanning a range not much wider than the rows.

    Keys spanning about the rows' count are looked up in a table of positions indexed by value:
    a few array passes where hashing the rows costs several times more. A wider span (keys of one
    bucket spread over the whole key range) marks the keys in a bitmap, one bit per value (so it
    stays in cache where a table of positions would not), and looks up only the rows it hits;
    sparse keys (span far above the row count) fall back to hashing every row.
    """
    if not _addressable(column.type) or len(keys) == 0 or column.null_count:
        return None
    wanted = np.asarray(keys.to_numpy(), dtype=np.int64)
    low, high = int(wanted.min()), int(wanted.max())
    span = high - low + 1
    if span > _BITMAP_SPAN * (len(column) + len(wanted)) or len(wanted) >= 1 << 31:
        return None
    rows = np.asarray(column.to_numpy(), dtype=np.int64)
    if span > _TABLE_SPAN * (len(column) + len(wanted)):
        hits = np.flatnonzero(_marked(rows, wanted, low, span))
        return hits, _positions(pc.index_in(pa.array(rows[hits]), value_set=pa.array(wanted)))
    # int32 positions: half the table, so more of it stays in cache during the random lookups.
    table = np.full(span + 1, -1, dtype=np.int32)  # the extra slot answers for out-of-range rows
    table[wanted - low] = np.arange(len(wanted), dtype=np.int32)
    return _found(table[_offsets(rows, low, span)])


def _marked(rows: IntArray, wanted: IntArray, low: int, span: int) -> npt.NDArray[np.bool_]:
    """Whether each of `rows` is among `wanted` (all in [low, low + span)), by a bitmap of bits."""
    bits = np.zeros((span >> 3) + 1, dtype=np.uint8)  # bit `span` stays clear, for rows outside
    marks = wanted - low
    np.bitwise_or.at(bits, marks >> 3, np.left_shift(1, marks & 7).astype(np.uint8))
    offsets = _offsets(rows, low, span)
    # In place where it can be: each new 1M-row temporary costs page faults as well as a pass.
    bit = offsets.astype(np.uint8)
    np.bitwise_and(bit, 7, out=bit)
    np.right_shift(offsets, 3, out=offsets)
    hit = bits[offsets]
    np.right_shift(hit, bit, out=hit)
    np.bitwise_and(hit, 1, out=hit)
    result: npt.NDArray[np.bool_] = hit.view(np.bool_)
    return result


def _offsets(rows: IntArray, low: int, span: int) -> IntArray:
    """`rows - low`, and `span` for rows outside [low, low + span) (also where the difference wraps
    around int64: read as unsigned, it then exceeds any span). A new array: the column's own buffer
    is never written."""
    offsets = (rows - low).view(np.uint64)
    np.minimum(offsets, np.uint64(span), out=offsets)
    result: IntArray = offsets.view(np.int64)
    return result


def _encode(column: pa.ChunkedArray) -> tuple[IntArray, int]:
    if len(column) == 0:
        return np.zeros(0, dtype=np.int64), 0
    dense = _encode_dense(column)
    if dense is not None:
        return dense
    encoded = pc.dictionary_encode(column)
    # Arrow encodes all chunks against one growing memo table, so the indices agree across chunks.
    chunks = encoded.chunks if isinstance(encoded, pa.ChunkedArray) else [encoded]
    codes = np.concatenate([c.indices.to_numpy().astype(np.int64) for c in chunks])
    return codes, len(chunks[-1].dictionary)


def _encode_dense(column: pa.ChunkedArray) -> tuple[IntArray, int] | None:
    """`_encode` for integers spanning a range not much wider than the rows: rank by value.

    Marks present values in a bitmap over the range and numbers them in order: a few array
    passes, where hashing costs several times more. Sparse integers fall back to hashing.
    """
    if not _addressable(column.type):
        return None
    values = np.asarray(column.to_numpy(), dtype=np.int64)
    low, high = int(values.min()), int(values.max())
    if high - low >= 4 * len(values):
        return None
    offsets = values - low
    present = np.zeros(high - low + 1, dtype=np.bool_)
    present[offsets] = True
    rank = np.cumsum(present, dtype=np.int64) - 1
    codes: IntArray = rank[offsets]
    return codes, int(rank[-1]) + 1


def _addressable(kind: pa.DataType) -> bool:
    """Integer types whose values fit int64, so value - minimum can index an array."""
    return bool(pa.types.is_integer(kind) and not pa.types.is_uint64(kind))


def _positions(found: pa.Array | pa.ChunkedArray) -> IntArray:
    result: IntArray = np.asarray(found.fill_null(-1).to_numpy(), dtype=np.int64)
    return result
