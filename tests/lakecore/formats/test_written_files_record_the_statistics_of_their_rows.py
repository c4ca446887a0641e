"""The statistics recorded in a data file's write stat are those of its rows, whatever they hold.

A write takes the bounds and null counts the Parquet writer already computed for its footer (no second
pass over the rows) wherever they are the values themselves, and computes the rest from the rows; for
every type Weir stores, with nulls, NaN, signed zeros, infinities, extreme integers, strings and
binaries longer than a footer or a bound keeps, and several row groups, the result must equal the
statistics computed from the rows alone (`file_stats`), which data skipping and publishing trust."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lakecore.formats import file_stats, write_data_file
from lakecore.storage.local import LocalStorage

_INTS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}
_UINTS = {pa.uint8(): 8, pa.uint16(): 16, pa.uint32(): 32, pa.uint64(): 64}
_EPOCH = dt.datetime(1970, 1, 1)


def _strings(*, binary: bool) -> st.SearchStrategy:
    # short ones, ones over the 64-byte bound limit, and ones over the footer's 4,096-byte limit
    text = st.one_of(st.text(max_size=6), st.text(min_size=65, max_size=80),
                     st.builds(lambda c, n: c * n, st.characters(), st.integers(4097, 4200)))
    return text.map(lambda s: s.encode()) if binary else text


def _values(t: pa.DataType) -> st.SearchStrategy:
    if t in _INTS:
        bits = _INTS[t]
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if t in _UINTS:
        return st.integers(0, 2 ** _UINTS[t] - 1)
    if pa.types.is_floating(t):
        return st.floats(allow_nan=True, allow_infinity=True, width=32 if t == pa.float32() else 64)
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _strings(binary=False)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return _strings(binary=True)
    if pa.types.is_date32(t):
        return st.dates()
    if pa.types.is_timestamp(t):
        return st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1))
    if pa.types.is_time64(t) or pa.types.is_time32(t):
        return st.times()
    if pa.types.is_decimal(t):
        return st.decimals(min_value=Decimal("-99999.99"), max_value=Decimal("99999.99"), places=2,
                           allow_nan=False, allow_infinity=False)
    raise AssertionError(t)


TYPES = [*_INTS, *_UINTS, pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.large_string(),
         pa.binary(), pa.large_binary(), pa.date32(), pa.timestamp("s"), pa.timestamp("ms", "UTC"),
         pa.timestamp("us"), pa.timestamp("ns", "UTC"), pa.time32("s"), pa.time64("us"),
         pa.decimal128(7, 2)]


@st.composite
def tables(draw: st.DrawFn) -> tuple[pa.Table, int]:
    rows = draw(st.integers(0, 12))
    chosen = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=5, unique_by=str))
    columns = {}
    for i, t in enumerate(chosen):
        mostly_null = draw(st.booleans())
        values = draw(st.lists(st.one_of(st.none(), _values(t)) if mostly_null else _values(t),
                               min_size=rows, max_size=rows))
        columns[f"c{i}"] = pa.array(values, t)
    return pa.table(columns), draw(st.integers(1, 5))


def _written(tmp: Path, table: pa.Table, row_group: int) -> dict:
    storage = LocalStorage(str(tmp))
    _, stats = write_data_file(storage, "f.parquet", table, compression="zstd", row_group_size=row_group)
    return stats.to_json()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=tables())
@example(case=(pa.table({"f": pa.array([float("nan"), -0.0, 0.0, None], pa.float64()),
                         "u": pa.array([0, 2**64 - 1, None, 5], pa.uint64())}), 2))
@example(case=(pa.table({"f": pa.array([float("nan"), None], pa.float32()),
                         "s": pa.array(["z" * 5000, "a"], pa.string())}), 1))
@example(case=(pa.table({"s": pa.array(["b", "y" * 5000, "z"], pa.string())}), 2))
@example(case=(pa.table({"t": pa.array([_EPOCH, None], pa.timestamp("s"))}), 1))
def test_a_written_files_statistics_equal_those_of_its_rows(tmp_path: Path,
                                                            case: tuple[pa.Table, int]) -> None:
    table, row_group = case
    assert _written(tmp_path, table, row_group) == file_stats(table).to_json()
