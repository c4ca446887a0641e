"""A data file's integer, date, time and timestamp columns are written DELTA_BINARY_PACKED (unless they
are dictionary-encoded: repeating values; floats stay PLAIN, which Spark's vectorized reader needs), and
every value reads back exactly: the extremes of each integer width and of timestamps (neighbours whose
difference overflows 64 bits), unsigned 64-bit values above the signed range, NaN,
signed zeros, infinities, nulls, and several row groups."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakecore.formats import file_stats, write_data_file
from lakecore.storage.local import LocalStorage

INTS = {pa.int8(): (-(2 ** 7), 2 ** 7 - 1), pa.int16(): (-(2 ** 15), 2 ** 15 - 1),
        pa.int32(): (-(2 ** 31), 2 ** 31 - 1), pa.int64(): (-(2 ** 63), 2 ** 63 - 1),
        pa.uint8(): (0, 2 ** 8 - 1), pa.uint32(): (0, 2 ** 32 - 1), pa.uint64(): (0, 2 ** 64 - 1)}
FLOATS = (pa.float32(), pa.float64())
DAY_MS = 86_400_000
# temporal types that Parquet stores as they are, with the range of their integer values: all of it,
# also far outside the years 1 to 9999 that Python's datetime holds (a write's statistics once failed
# there with OverflowError, after the file was written)
TEMPORAL = {pa.date32(): (pa.int32(), -(2 ** 31), 2 ** 31 - 1), pa.time32("ms"): (pa.int32(), 0, DAY_MS - 1),
            pa.time64("us"): (pa.int64(), 0, DAY_MS * 1000 - 1),
            pa.time64("ns"): (pa.int64(), 0, DAY_MS * 1_000_000 - 1),
            pa.timestamp("ms"): (pa.int64(), -(2 ** 63), 2 ** 63 - 1),
            pa.timestamp("us", tz="UTC"): (pa.int64(), -(2 ** 63), 2 ** 63 - 1),
            pa.timestamp("ns", tz="Europe/Paris"): (pa.int64(), -(2 ** 63), 2 ** 63 - 1)}


def column(t: pa.DataType, rows: int) -> st.SearchStrategy[pa.Array]:
    """`rows` values of `t` or nulls; integers and temporals lean on their extremes and zero."""
    if t in FLOATS:
        value: st.SearchStrategy = st.floats(width=t.bit_width, allow_nan=True, allow_infinity=True)
        storage = t
    else:
        storage, low, high = TEMPORAL[t] if t in TEMPORAL else (t, *INTS[t])
        value = st.one_of(st.sampled_from([low, high, 0]), st.integers(low, high))
    return st.lists(st.one_of(st.none(), value), min_size=rows, max_size=rows).map(
        lambda values: pa.array(values, storage).view(t))


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(1, 100))
    types = [*INTS, *FLOATS, *TEMPORAL]
    return pa.table({f"c{i}": draw(column(t, rows)) for i, t in enumerate(types)})


def encodings(path: Path) -> dict[str, set[str]]:
    meta = pq.ParquetFile(path).metadata
    out: dict[str, set[str]] = {}
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            chunk = meta.row_group(g).column(c)
            out.setdefault(chunk.path_in_schema, set()).update(chunk.encodings)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables())
def test_numbers_read_back_exactly(tmp_path: Path, table: pa.Table) -> None:
    storage = LocalStorage(str(tmp_path))
    _, stats = write_data_file(storage, "f.parquet", table, compression="zstd", row_group_size=32)
    assert stats == file_stats(table)
    back = pq.read_table(tmp_path / "f.parquet")
    for name in table.column_names:   # NaN != NaN: compare the bits of floats
        want, got = table[name].combine_chunks(), back[name].combine_chunks()
        assert got.type == want.type
        if pa.types.is_floating(want.type) or want.type in TEMPORAL:
            width = pa.int32() if want.type.bit_width == 32 else pa.int64()
            want, got = (a.view(width) for a in (want, got))
        assert got.equals(want), name


def test_the_encoding_follows_the_column(tmp_path: Path) -> None:
    n = 50_000
    table = pa.table({"id": pa.array(range(n), pa.int64()),
                      "small": pa.array([i % 3 for i in range(n)], pa.int32()),   # repeats: dictionary
                      "x": pa.array([i * 0.37 for i in range(n)], pa.float64()),
                      "y": pa.array([i / 7 for i in range(n)], pa.float32()),
                      "at": pa.array([1_790_000_000_000_000 + 37 * i for i in range(n)], pa.int64()).view(
                          pa.timestamp("us", tz="UTC")),
                      "s": pa.array([f"v{i}" for i in range(n)])})
    write_data_file(LocalStorage(str(tmp_path)), "f.parquet", table, compression="lz4")
    found = encodings(tmp_path / "f.parquet")
    assert "DELTA_BINARY_PACKED" in found["id"] and "DELTA_BINARY_PACKED" in found["at"]
    assert "BYTE_STREAM_SPLIT" not in found["x"] | found["y"]   # Spark's vectorized reader refuses it
    assert "RLE_DICTIONARY" in found["small"] and "DELTA_BINARY_PACKED" not in found["small"]
    assert found["s"] & {"PLAIN", "RLE_DICTIONARY"}   # strings: as before
    assert pq.read_table(tmp_path / "f.parquet").equals(table)
