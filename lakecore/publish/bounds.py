"""Column statistics of published data files, from Weir's write stats (`lakecore.formats.stats`), so
readers prune files by min/max without Weir opening a Parquet footer. Pure.

Iceberg: `value_counts`, `null_value_counts`, `nan_value_counts` and `lower_bounds`/`upper_bounds` by
field id, bounds in Iceberg's single-value binary serialization (little-endian numbers, timestamps and
times in microseconds, UTF-8 strings, big-endian two's-complement unscaled decimals). Delta: the
`stats` JSON (`numRecords`, `nullCount`, `minValues`, `maxValues` for numbers, strings and dates;
`tightBounds` false when a deletion vector hides rows). Both describe every row stored in the file,
hidden ones included: bounds a reader prunes by may be wider than the rows it shows, never narrower.
Only the table's columns get statistics (the `_weir_*` meta columns are not in the published schema).
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa

from lakecore.formats.stats import ColumnStats, FileStats, known_nans
from lakecore.publish.types import FieldIds, iceberg_type

_UNIT_TO_US = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": None}


def _iceberg_bytes(kind: str, t: pa.DataType, value: Any, stored: Any) -> bytes | None:
    """`value` (a typed Python value) and `stored` (its JSON form) in Iceberg's binary form."""
    if kind == "boolean":
        return b"\x01" if value else b"\x00"
    if kind in ("int", "date"):
        return struct.pack("<i", int(stored))
    if kind == "long":
        return struct.pack("<q", int(stored))
    if kind in ("timestamp", "timestamptz", "time"):
        factor = _UNIT_TO_US.get(t.unit)
        return None if factor is None else struct.pack("<q", int(stored) * factor)
    if kind == "float":
        return struct.pack("<f", float(stored))
    if kind == "double":
        return struct.pack("<d", float(stored))
    if kind == "string":
        return str(value).encode()
    if kind == "binary":
        return bytes(value)
    if kind.startswith("decimal"):
        unscaled = int(Decimal(str(stored)).scaleb(t.scale))
        return unscaled.to_bytes((unscaled.bit_length() + 8) // 8 or 1, "big", signed=True)
    return None


IcebergColumn = tuple[pa.Field, str, int]  # the column, its Iceberg type, its field id


def iceberg_columns(schema: pa.Schema, ids: FieldIds) -> list[IcebergColumn]:
    """The columns that get Iceberg statistics (primitive ones), decided once per publish."""
    out = []
    for f in schema:
        kind = iceberg_type((f.name,), f.type, ids)
        if isinstance(kind, str):
            out.append((f, kind, ids.of((f.name,))))
    return out


def iceberg_metrics(stats: FileStats | None, columns: list[IcebergColumn]) -> dict[str, Any]:
    """The data-file fields of a manifest entry that carry column statistics (all None: unknown)."""
    empty: dict[str, Any] = {"value_counts": None, "null_value_counts": None, "nan_value_counts": None,
                             "lower_bounds": None, "upper_bounds": None}
    if stats is None:
        return empty
    values, nulls, nans, lower, upper = [], [], [], [], []
    for f, kind, fid in columns:
        col = stats.columns.get(f.name)
        if col is None:
            continue
        values.append({"key": fid, "value": stats.rows})
        nulls.append({"key": fid, "value": col.nulls})
        if col.nans is not None:
            nans.append({"key": fid, "value": col.nans})
        if col.min is None or col.max is None:
            continue
        low = _iceberg_bytes(kind, f.type, _value(kind, col.min), col.min)
        high = _iceberg_bytes(kind, f.type, _value(kind, col.max), col.max)
        if low is not None and high is not None:
            lower.append({"key": fid, "value": low})
            upper.append({"key": fid, "value": high})
    return {"value_counts": values, "null_value_counts": nulls, "nan_value_counts": nans or None,
            "lower_bounds": lower or None, "upper_bounds": upper or None}


def _value(kind: str, stored: Any) -> Any:
    """The Python value `_iceberg_bytes` needs of a JSON-form bound (only booleans, strings and
    binaries use it), without building Arrow scalars: a publish does this for every file."""
    return bytes.fromhex(stored) if kind == "binary" else stored


def _bounds(col: ColumnStats, t: pa.DataType) -> tuple[Any, Any] | None:
    scalars = col.bounds(t)
    return None if scalars is None else (scalars[0].as_py(), scalars[1].as_py())


def _delta_value(t: pa.DataType, value: Any) -> Any:
    if pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return value
    if pa.types.is_floating(t):
        return float(value) if math.isfinite(value) else None  # JSON has no infinities
    if pa.types.is_date32(t):
        return value.isoformat()
    return None


def delta_stats(stats: FileStats | None, schema: pa.Schema, rows: int, *, hides_rows: bool) -> dict[str, Any]:
    """A Delta `add` action's `stats` (before JSON encoding)."""
    out: dict[str, Any] = {"numRecords": rows}
    if stats is None:
        return out
    nulls: dict[str, int] = {}
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    for f in schema:
        col = stats.columns.get(f.name)
        if col is None:
            continue
        nulls[f.name] = col.nulls
        pair = _bounds(col, f.type) if known_nans(col, f.type) else None
        if pair is None:
            continue
        lo, hi = _delta_value(f.type, pair[0]), _delta_value(f.type, pair[1])
        if lo is not None and hi is not None:
            low[f.name], high[f.name] = lo, hi
    out.update({"minValues": low, "maxValues": high, "nullCount": nulls})
    if hides_rows:
        out["tightBounds"] = False
    return out

