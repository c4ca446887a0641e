"""Per-column statistics of a data file, taken as it is written (the bounds and null counts the Parquet
writer computes for its footer anyway, the rest from the Arrow table: no second pass over the file) and
kept in the file's write stat in
the commit metadata. Readers skip files with them (`lakecore.read.skipping`) and publishing fills
Iceberg manifest bounds and Delta `stats` from them, so neither opens a Parquet footer. Pure.

JSON form (`FileStats.to_json`): `{"rows": N, "columns": {name: {"min", "max", "nulls", "nans"}}}`,
one entry per column of a primitive type (nested columns get none). `min`/`max` exclude nulls and
NaN and are absent when no value has one (all null, all NaN) or a string or binary bound is longer
than `MAX_BOUND_BYTES`; `nans` is there for floating-point columns only. Values are JSON numbers,
strings and booleans: temporal types as their integer storage (days, or units since the epoch),
decimals as strings, binaries as hex.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

MAX_BOUND_BYTES = 64


@dataclass(frozen=True)
class ColumnStats:
    nulls: int
    nans: int | None = None     # floating-point columns only (None there: unknown, from a footer)
    min: Any = None             # JSON form (see the module docstring); None: unknown
    max: Any = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nulls": self.nulls}
        if self.nans is not None:
            out["nans"] = self.nans
        if self.min is not None and self.max is not None:
            out["min"], out["max"] = self.min, self.max
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ColumnStats:
        nans = d.get("nans")
        return cls(int(d["nulls"]), None if nans is None else int(nans), d.get("min"), d.get("max"))

    def bounds(self, t: pa.DataType) -> tuple[pa.Scalar, pa.Scalar] | None:
        """(min, max) as scalars of type `t`, or None when unknown."""
        if self.min is None or self.max is None:
            return None
        storage = _storage_type(t)
        if storage is None:
            return None
        values = [self.min, self.max]
        if pa.types.is_binary(storage) or pa.types.is_large_binary(storage):
            values = [bytes.fromhex(v) for v in values]
        arr = pa.array(values, storage)
        arr = arr if storage == t else arr.cast(t)
        return arr[0], arr[1]


@dataclass(frozen=True)
class FileStats:
    rows: int                                # rows stored in the file (deletes, tombstones included)
    columns: Mapping[str, ColumnStats]

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "columns": {k: v.to_json() for k, v in self.columns.items()}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> FileStats:
        return cls(int(d["rows"]), {str(k): ColumnStats.from_json(v) for k, v in d["columns"].items()})


def _storage_type(t: pa.DataType) -> pa.DataType | None:
    """The type whose values JSON holds as they are (None: no bounds for `t`)."""
    if pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_floating(t) \
            or pa.types.is_string(t) or pa.types.is_large_string(t) \
            or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return t
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32()
    if pa.types.is_timestamp(t) or pa.types.is_time64(t) or pa.types.is_date64(t):
        return pa.int64()
    if pa.types.is_decimal(t):
        return pa.string()
    return None


def _column(col: pa.ChunkedArray) -> ColumnStats | None:
    t = col.type
    storage = _storage_type(t)
    if storage is None:
        return None
    nulls = col.null_count
    nans = None
    values = col
    if pa.types.is_floating(t):
        is_nan = pc.is_nan(col)
        nans = int(pc.sum(is_nan).as_py() or 0)
        if nans:
            values = pc.filter(col, pc.invert(is_nan))
    mm = pc.min_max(values)
    return ColumnStats(nulls, nans, *_encoded(mm["min"], mm["max"], t))


def _encoded(low: pa.Scalar, high: pa.Scalar, t: pa.DataType) -> tuple[Any, Any]:
    """Bounds of type `t` in their JSON form ((None, None): none to keep)."""
    storage = _storage_type(t)
    if storage is None or not low.is_valid or not high.is_valid:
        return None, None
    lo, hi = (v.as_py() if storage == t else v.cast(storage).as_py() for v in (low, high))
    if isinstance(lo, (str, bytes)) and max(len(lo), len(hi)) > MAX_BOUND_BYTES:
        return None, None  # a long key's bound would cost more than it saves
    if isinstance(lo, bytes):
        lo, hi = lo.hex(), hi.hex()
    return lo, hi


def known_nans(col: ColumnStats, t: pa.DataType) -> bool:
    """Whether `col`'s bounds hold for every non-null row: no NaN, or not a floating-point column."""
    return not pa.types.is_floating(t) or col.nans == 0


def footer_stats(metadata: pq.FileMetaData, schema: pa.Schema) -> FileStats:
    """Statistics of a file written before Weir recorded them, from its Parquet footer's row-group
    statistics (top-level primitive columns; NaN counts are unknown there)."""
    columns = {}
    for j in range(metadata.num_columns):
        name = metadata.schema.column(j).path
        if name not in schema.names or _storage_type(schema.field(name).type) is None:
            continue
        t = schema.field(name).type
        parts = [metadata.row_group(i).column(j).statistics for i in range(metadata.num_row_groups)]
        if any(st is None or not st.has_null_count for st in parts):
            continue
        nulls = sum(st.null_count for st in parts)
        ranged = [st for st in parts if st.has_min_max]
        lo = hi = None
        if ranged and len(ranged) == sum(1 for st in parts if st.num_values > 0):
            try:
                low = min(st.min for st in ranged)
                high = max(st.max for st in ranged)
                lo, hi = _encoded(pa.scalar(low, t), pa.scalar(high, t), t)
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                lo = hi = None   # OverflowError: a date or time Python's datetime cannot hold (year > 9999)
        columns[name] = ColumnStats(nulls, None, lo, hi)
    return FileStats(metadata.num_rows, columns)


def _footer_exact(t: pa.DataType) -> bool:
    """Whether a Parquet footer's bounds of a `t` column are its values as they are (temporal types may
    be stored in another unit, decimals as bytes: those are computed from the table instead)."""
    return pa.types.is_boolean(t) or pa.types.is_integer(t) or t in (pa.float32(), pa.float64()) \
        or pa.types.is_string(t) or pa.types.is_large_string(t) \
        or pa.types.is_binary(t) or pa.types.is_large_binary(t)


def written_stats(table: pa.Table, metadata: pq.FileMetaData) -> FileStats:
    """`file_stats(table)` of the file written from `table` whose footer is `metadata`, without the
    min/max pass over the table where the writer's own row-group statistics give the same answer
    (integers, floats, booleans, strings, binaries: a fifth of a bulk write's CPU); NaN counts and the
    other columns come from `table`, as does any column whose footer bounds are missing while it
    holds values (a bound too long for the footer, a float column of NaN only)."""
    footer = footer_stats(metadata, table.schema).columns
    columns = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        got = footer.get(name)
        stats: ColumnStats | None
        if got is None or not _footer_exact(col.type) or (got.min is None and got.nulls < len(col)):
            stats = _column(col)
        elif pa.types.is_floating(col.type):
            stats = replace(got, nans=int(pc.sum(pc.is_nan(col)).as_py() or 0))
        else:
            stats = got
        if stats is not None:
            columns[name] = stats
    return FileStats(table.num_rows, columns)


def file_stats(table: pa.Table) -> FileStats:
    """The statistics of `table` as a data file stores it: one entry per primitive column."""
    columns = {}
    for name, col in zip(table.column_names, table.columns, strict=True):
        stats = _column(col)
        if stats is not None:
            columns[name] = stats
    return FileStats(table.num_rows, columns)


class PartStats:
    """`written_stats` of a file written a row group at a time from rows never held whole (`add` each
    part as it is written, then `of` the footer): what the footer cannot say is taken from each part
    as it goes by, the NaN count of each floating-point column, and the parts of each column whose
    footer bounds are not its values (temporal types, decimals: `_footer_exact`), kept until the file
    is written. Where the footer has no bounds for a column of exact type that holds values (a bound
    too long for the footer; a float column with a row group of NaN only), the bounds stay unknown,
    where `written_stats` of the whole table could still compute them: only skipping is lost."""

    def __init__(self) -> None:
        self._nans: dict[str, int] = {}
        self._kept: dict[str, list[pa.Array]] = {}

    def add(self, part: pa.Table) -> None:
        for name, col in zip(part.column_names, part.columns, strict=True):
            if _storage_type(col.type) is None:
                continue  # no statistics for it (nested types)
            if not _footer_exact(col.type):
                self._kept.setdefault(name, []).extend(col.chunks)
            elif pa.types.is_floating(col.type):
                self._nans[name] = self._nans.get(name, 0) + int(pc.sum(pc.is_nan(col)).as_py() or 0)

    def of(self, metadata: pq.FileMetaData, schema: pa.Schema) -> FileStats:
        footer = footer_stats(metadata, schema).columns
        columns = {}
        for f in schema:
            stats: ColumnStats | None
            if f.name in self._kept:
                stats = _column(pa.chunked_array(self._kept[f.name], f.type))
            elif (got := footer.get(f.name)) is not None and pa.types.is_floating(f.type):
                stats = replace(got, nans=self._nans.get(f.name, 0))
            else:
                stats = got
            if stats is not None:
                columns[f.name] = stats
        return FileStats(metadata.num_rows, columns)
