"""The bucket function of format-1 tables (`bucket_hash` "weir_v1"): record key -> bucket in [0, N).
Part of the on-disk format; never change it. Format-2 tables hash with Spark's Murmur3 instead
(`layout.murmur3`); `table_bucket_of` picks the one a table.json names.

Deterministic across processes, machines and Python versions (no `hash()`), and vectorized: integer
keys go through splitmix64, strings through a polynomial hash over their bytes computed with numpy
over the Arrow buffers, composite keys combine the per-column hashes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.layout import murmur3

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_P = np.uint64(0x100000001B3)
_P_INV = np.uint64(pow(0x100000001B3, -1, 2**64))


def _mix(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * _M1
    x = x ^ (x >> np.uint64(27))
    x = x * _M2
    return x ^ (x >> np.uint64(31))


def _string_hash(arr: pa.Array) -> np.ndarray:
    # Polynomial hash of each string's bytes: with G = cumsum(b_j * P^j) over the whole data buffer,
    # the hash of bytes [s, e) is (G[e] - G[s]) * P^-s, all modulo 2**64 (P is odd, so invertible).
    off_type = np.int64 if (pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)) \
        else np.int32
    n = len(arr)
    bufs = arr.buffers()
    raw = np.frombuffer(bufs[1], dtype=off_type)[arr.offset: arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    first = int(raw[0]) if n else 0
    offsets = raw - first if n else np.zeros(1, np.int64)
    data = data[first: first + int(offsets[-1])]
    total = len(data)
    powers = np.full(total + 1, _P, dtype=np.uint64)
    powers[0] = 1
    np.cumprod(powers, out=powers)
    inverse = np.full(total + 1, _P_INV, dtype=np.uint64)
    inverse[0] = 1
    np.cumprod(inverse, out=inverse)
    g = np.zeros(total + 1, dtype=np.uint64)
    np.cumsum((data.astype(np.uint64) + np.uint64(1)) * powers[:total], out=g[1:])
    h = (g[offsets[1:]] - g[offsets[:-1]]) * inverse[offsets[:-1]]
    return _mix(h ^ np.diff(offsets).astype(np.uint64))


def _column_hash(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = arr.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) \
            or pa.types.is_large_binary(t):
        return _string_hash(arr)
    if pa.types.is_boolean(t):
        arr = pc.cast(arr, pa.int64())
    elif pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        arr = arr.cast(pa.int64()) if arr.type.bit_width == 64 else arr.cast(pa.int32()).cast(pa.int64())
    elif pa.types.is_decimal(t):
        return _string_hash(pc.cast(arr, pa.string()))
    values = arr.to_numpy(zero_copy_only=False).astype(np.int64, copy=False).view(np.uint64)
    return _mix(values)


def key_hash(columns: Sequence[pa.ChunkedArray | pa.Array]) -> np.ndarray:
    h = _column_hash(columns[0])
    for col in columns[1:]:
        h = _mix(h * _P + _column_hash(col))
    return h


def bucket_of(columns: Sequence[pa.ChunkedArray | pa.Array], buckets: int) -> np.ndarray:
    """Bucket of every row (int32), from the record-key columns."""
    if buckets == 1:
        return np.zeros(len(columns[0]), dtype=np.int32)
    return (key_hash(columns) % np.uint64(buckets)).astype(np.int32)


def table_bucket_of(columns: Sequence[pa.ChunkedArray | pa.Array], buckets: int,
                    bucket_hash: str) -> np.ndarray:
    """Bucket of every row (int32) under the table's `bucket_hash` ("weir_v1" or "spark_murmur3")."""
    if bucket_hash == "spark_murmur3":
        return murmur3.bucket_of(columns, buckets)
    if bucket_hash != "weir_v1":
        raise ValueError(f"unknown bucket_hash {bucket_hash!r}")
    return bucket_of(columns, buckets)
