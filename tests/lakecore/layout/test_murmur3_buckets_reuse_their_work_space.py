"""`murmur3.bucket_of` hashes a chunk of rows at a time in work space it reuses (allocating it per chunk
page-faulted fresh memory for every chunk); its buckets are Spark's `pmod(hash(keys), n)` of each row
over chunk boundaries, for every bucket count, and it allocates no work space per chunk."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakecore.layout import murmur3


def pmod(hashes: np.ndarray, buckets: int) -> np.ndarray:
    return np.mod(hashes.astype(np.int64), buckets).astype(np.int32)   # Python's mod is Spark's pmod


@pytest.mark.parametrize("buckets", [2, 3, 4, 7, 16, 1000])
def test_buckets_are_pmod_of_sparks_hash_across_chunks(buckets: int) -> None:
    rng = np.random.default_rng(buckets)
    n = 3 * murmur3._CHUNK + 123
    columns = {
        "int64": [pa.array(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64))],
        "int32": [pa.array(rng.integers(-(2**31), 2**31 - 1, n, dtype=np.int32))],
        "int8": [pa.array(rng.integers(-128, 127, n, dtype=np.int8))],
        "string, int64": [pa.array([f"k{i}" for i in rng.integers(0, 10**9, n)]),
                          pa.chunked_array([pa.array(rng.integers(0, 10**6, n // 2)),
                                            pa.array(rng.integers(0, 10**6, n - n // 2))])],
    }
    for name, cols in columns.items():
        got = murmur3.bucket_of(cols, buckets)
        assert got.dtype == np.int32
        assert np.array_equal(got, pmod(murmur3.spark_hash(cols), buckets)), name


def test_no_work_space_is_allocated_per_chunk(monkeypatch) -> None:
    made = []
    take = murmur3.Scratch.take

    def counted(self, n):
        made.append(len(self._buf) < n)
        return take(self, n)

    monkeypatch.setattr(murmur3.Scratch, "take", counted)
    n = 10 * murmur3._CHUNK
    murmur3.bucket_of([pa.array(np.arange(n, dtype=np.int64))], 4)
    assert len(made) == 10 and sum(made) == 1, "one allocation, then reuse"
