"""Spark's `hash()` (Murmur3, seed 42) over record keys, in numpy: the bucket hash of format-2 tables.

Part of the on-disk format; never change it. A table whose table.json says `"bucket_hash":
"spark_murmur3"` puts a row in bucket `pmod(hash(k1, k2, ...), buckets)`, exactly what Spark computes
with `F.pmod(F.hash(*keys), F.lit(buckets))` in the JVM; so a Spark job routes rows to their file
group without shipping them to Python, and lakecore's own writers agree with it row for row.

Spark's Murmur3 (org.apache.spark.sql.catalyst.expressions.Murmur3Hash): the columns are chained, each
column's 32-bit hash seeds the next one's (nulls leave the seed as it is; record keys have none).
Per stored Arrow type:
    bool                       hashInt(1 or 0)
    int8, int16, int32, date32 hashInt(value)
    int64                      hashLong(value)
    timestamp (any unit)       hashLong(microseconds since the epoch; nanoseconds floor-divided by 1000)
    string, binary (+ large)   hashUnsafeBytes(the bytes): 4-byte little-endian blocks, then each tail
                               byte mixed alone as a sign-extended int (unlike standard Murmur3)
    decimal128(p, s), p <= 18  hashLong(unscaled value)
    decimal128(p, s), p > 18   hashUnsafeBytes(unscaled value as Java's BigInteger.toByteArray():
                               minimal two's complement, big-endian)
Other record-key types (unsigned integers, time of day) have no Spark counterpart; tables keyed by them
keep the format-1 hash (`layout.buckets`).

Vectorized over rows: the byte hashes loop over the 4-byte block index (rows sorted by length, so
each step touches only the rows still that long), never over rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from lakecore.config import murmur3_key_type
from lakecore.errors import UnsupportedType

NAME = "spark_murmur3"
SEED = 42
_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_N = np.uint32(0xE6546B64)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)
_FIVE = np.uint32(5)
_MICROS_PER = {"s": 1_000_000, "ms": 1_000, "us": 1}


def supports(t: pa.DataType) -> bool:
    """Whether a record key of stored type `t` has a Spark Murmur3 counterpart."""
    return murmur3_key_type(t)


_CHUNK = 1 << 16  # rows hashed at a time: the arrays a chunk works on stay in the CPU cache


# The mixing steps work in place on uint32 arrays (`t` is scratch of the same length): numpy's
# uint32 arithmetic wraps modulo 2**32 exactly like Java's int.

def _mix_k1(k: np.ndarray, t: np.ndarray) -> None:
    k *= _C1
    np.left_shift(k, np.uint32(15), out=t)
    k >>= np.uint32(17)
    k |= t
    k *= _C2


def _mix_h1(h: np.ndarray, k: np.ndarray, t: np.ndarray) -> None:
    h ^= k
    np.left_shift(h, np.uint32(13), out=t)
    h >>= np.uint32(19)
    h |= t
    h *= _FIVE
    h += _N


def _fmix(h: np.ndarray, length: np.ndarray | np.uint32, t: np.ndarray) -> None:
    h ^= length
    np.right_shift(h, np.uint32(16), out=t)
    h ^= t
    h *= _F1
    np.right_shift(h, np.uint32(13), out=t)
    h ^= t
    h *= _F2
    np.right_shift(h, np.uint32(16), out=t)
    h ^= t


class Scratch:
    """uint32 work space reused from one chunk of rows to the next (`bucket_of`): allocating it per
    chunk had the allocator hand each chunk fresh pages (~0.9 MB a chunk: 16M rows, 0.1 s of page
    faults on the one thread routing runs on)."""

    def __init__(self) -> None:
        self._buf = np.empty(0, dtype=np.uint32)

    def take(self, n: int) -> np.ndarray:
        if len(self._buf) < n:
            self._buf = np.empty(n, dtype=np.uint32)
        return self._buf[:n]


def hash_int(values: np.ndarray, h: np.ndarray, scratch: Scratch | None = None) -> None:
    """h = Murmur3_x86_32.hashInt(values, seed=h), in place; `values` are taken modulo 2**32."""
    space = (scratch or Scratch()).take(2 * len(h))
    k, t = space[:len(h)], space[len(h):]
    np.copyto(k, values, casting="unsafe")  # a copy (or a wrap of a wider integer): mixed in place below
    _mix_k1(k, t)
    _mix_h1(h, k, t)
    _fmix(h, np.uint32(4), t)


def hash_long(values: np.ndarray, h: np.ndarray, scratch: Scratch | None = None) -> None:
    """h = Murmur3_x86_32.hashLong(values, seed=h), in place: the low 32-bit word, then the high one."""
    space = (scratch or Scratch()).take(4 * len(values))
    words, t = space[:2 * len(values)], space[2 * len(values):]
    np.copyto(words, np.ascontiguousarray(values, dtype=np.int64).view(np.uint32))
    _mix_k1(words, t)
    low, high = (words[0::2], words[1::2]) if np.little_endian else (words[1::2], words[0::2])
    t = t[:len(h)]
    _mix_h1(h, low, t)
    _mix_h1(h, high, t)
    _fmix(h, np.uint32(8), t)


def hash_bytes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, h: np.ndarray) -> None:
    """h = Murmur3_x86_32.hashUnsafeBytes(data[starts[i]: starts[i] + lengths[i]], seed=h), in place.
    `data` must have 3 readable bytes past the last string (see `_padded`)."""
    n = len(lengths)
    if not n:
        return
    words = np.ndarray(shape=(len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))  # a word at every byte
    blocks = lengths // 4
    order = np.argsort(-blocks, kind="stable")  # longest first: the rows still hashing are a prefix
    s_starts, s_blocks, s_lengths = starts[order], blocks[order], lengths[order]
    hs = h[order]
    t = np.empty_like(hs)
    # rows with more than i blocks, for every i
    counts = np.searchsorted(-s_blocks, -np.arange(int(s_blocks[0])), side="left")
    for i, m in enumerate(counts.tolist()):
        k = words[s_starts[:m] + 4 * i]
        _mix_k1(k, t[:m])
        view = hs[:m]
        _mix_h1(view, k, t[:m])
    signed = data.view(np.int8)
    tail = s_lengths - s_blocks * 4
    for j in range(3):  # the tail: each byte alone, sign-extended
        rows = np.flatnonzero(tail > j)
        if not len(rows):
            break
        k = signed[s_starts[rows] + s_blocks[rows] * 4 + j].astype(np.int32).view(np.uint32)
        sub = hs[rows]
        _mix_k1(k, t[:len(rows)])
        _mix_h1(sub, k, t[:len(rows)])
        hs[rows] = sub
    _fmix(hs, s_lengths.astype(np.uint32), t)
    h[order] = hs


def _padded(data: np.ndarray) -> np.ndarray:
    out = np.zeros(len(data) + 3, dtype=np.uint8)
    out[:len(data)] = data
    return out


# (first row, row after the last, seeds -> hashes, work space)
Hasher = Callable[[int, int, np.ndarray, Scratch], None]


def _hasher(col: pa.ChunkedArray | pa.Array) -> Hasher:
    """Spark's Murmur3 of one record-key column (no nulls), as a function over a range of its rows."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = arr.type
    if not supports(t):
        raise UnsupportedType(f"a record key of type {t} has no Spark Murmur3 hash (bucket_hash "
                              f"{NAME!r}); such tables use bucket_hash 'weir_v1'")
    n = len(arr)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t):
        large = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        bufs = arr.buffers()
        offsets = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)
        offsets = offsets[arr.offset: arr.offset + n + 1]
        raw = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        first, last = (int(offsets[0]), int(offsets[-1])) if n else (0, 0)
        data = _padded(raw[first:last])
        offsets = offsets.astype(np.int64) - first
        starts, lengths = offsets[:-1], np.diff(offsets)
        return lambda lo, hi, h, _: hash_bytes(data, starts[lo:hi], lengths[lo:hi], h)
    if pa.types.is_decimal(t):
        if t.precision <= 18:  # the low 64-bit word holds the whole unscaled value
            words = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset * 2: (arr.offset + n) * 2]
            low = words[0::2]
            return lambda lo, hi, h, scratch: hash_long(low[lo:hi], h, scratch)
        data, starts, lengths = _decimal_bytes(arr)
        return lambda lo, hi, h, _: hash_bytes(data, starts[lo:hi], lengths[lo:hi], h)
    if pa.types.is_boolean(t):
        flags = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.uint32)
        return lambda lo, hi, h, scratch: hash_int(flags[lo:hi], h, scratch)
    if pa.types.is_timestamp(t):
        values = arr.cast(pa.int64()).to_numpy(zero_copy_only=False)
        if t.unit == "ns":
            values = np.floor_divide(values, 1000)
        elif t.unit != "us":
            values = values * _MICROS_PER[t.unit]
        return lambda lo, hi, h, scratch: hash_long(values[lo:hi], h, scratch)
    if pa.types.is_date32(t):
        arr = arr.cast(pa.int32())
    ints = arr.to_numpy(zero_copy_only=False)
    if ints.dtype == np.int64:
        return lambda lo, hi, h, scratch: hash_long(ints[lo:hi], h, scratch)
    return lambda lo, hi, h, scratch: hash_int(ints[lo:hi], h, scratch)


def _decimal_bytes(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, starts, lengths): each unscaled value as Java's BigInteger.toByteArray()."""
    n = len(arr)
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8)[arr.offset * 16: (arr.offset + n) * 16]
    be = raw.reshape(n, 16)[:, ::-1]  # big-endian
    sign = np.where(be[:, 0] >= 0x80, 0xFF, 0x00).astype(np.uint8)
    # a leading byte is redundant while it equals the sign byte and the next byte has the same sign bit
    redundant = np.ones(n, dtype=bool)
    skip = np.zeros(n, dtype=np.int64)
    for i in range(15):
        redundant &= (be[:, i] == sign) & ((be[:, i + 1] & 0x80) == (sign & 0x80))
        skip += redundant
    return _padded(be.reshape(-1)), np.arange(n, dtype=np.int64) * 16 + skip, 16 - skip


def bucket_of(columns: Sequence[pa.ChunkedArray | pa.Array], buckets: int) -> np.ndarray:
    """Bucket of every row (int32): Spark's `pmod(hash(c1, c2, ...), buckets)`."""
    n = len(columns[0])
    if buckets == 1:
        return np.zeros(n, dtype=np.int32)
    hashers = [_hasher(c) for c in columns]
    out = np.empty(n, dtype=np.int32)
    power_of_two = buckets & (buckets - 1) == 0
    wrap = (1 << 32) % buckets
    seeds, scratch = np.empty(min(n, _CHUNK), dtype=np.uint32), Scratch()
    negative = np.empty(len(seeds), dtype=np.bool_)
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        h = seeds[:hi - lo]
        h.fill(SEED)
        for hasher in hashers:
            hasher(lo, hi, h, scratch)
        if power_of_two:  # pmod by 2**k of a two's complement int is its low k bits
            np.bitwise_and(h, np.uint32(buckets - 1), out=h)
            out[lo:hi] = h.view(np.int32)
        else:  # pmod through the unsigned remainder (numpy's is faster than its signed one)
            r, neg = out[lo:hi], negative[:hi - lo]
            np.less(h.view(np.int32), 0, out=neg)  # h < 0 is h + 2**32 as unsigned
            np.remainder(h, np.uint32(buckets), out=r.view(np.uint32))
            np.subtract(r, np.int32(wrap), out=r, where=neg)
            np.less(r, 0, out=neg)
            np.add(r, np.int32(buckets), out=r, where=neg)
    return out


def spark_hash(columns: Sequence[pa.ChunkedArray | pa.Array]) -> np.ndarray:
    """Spark's `hash(c1, c2, ...)` of every row, as int32."""
    h = np.full(len(columns[0]), SEED, dtype=np.uint32)
    for hasher in [_hasher(c) for c in columns]:
        hasher(0, len(h), h, Scratch())
    return h.view(np.int32)
