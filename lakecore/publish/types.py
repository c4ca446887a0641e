"""The type map: how each Arrow type of a Weir table shows in Iceberg (format v2) and Delta, and what
the readers of each target give back. Pure.

A type a target cannot hold is refused with NotPublishable naming the column, never converted with a
loss: nanosecond timestamps and times (Iceberg v2 and Delta keep microseconds), uint64 (neither has
an unsigned type, and no signed type holds its range), time of day in Delta (no such type), a time
zone other than UTC or a time of day in another unit than microseconds in Iceberg (pyiceberg
refuses such files). Narrow
integers widen to the target's integer types (int8 reads back as int32 from Iceberg), seconds and
milliseconds widen to microseconds, any time zone shows as UTC (`timestamptz`, Delta `timestamp`):
the values are the same instants. See docs/interop.md for the whole table.

Iceberg needs an id per field (list elements included). Ids come from the previous snapshot's name
mapping when there is one (a column keeps its id for ever; a new one gets the next id); Weir's
Parquet files carry no field ids yet, so readers resolve columns through that name mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa

from lakecore.errors import NotPublishable

Target = Literal["iceberg", "delta"]
UTC_NAMES = frozenset({"UTC", "+00:00", "Etc/UTC", "Z"})
Path = tuple[str, ...]  # a field's names from the top: ("s", "x"), ("l", "element")


def _refuse(target: Target, name: str, t: pa.DataType, why: str) -> NotPublishable:
    title = "Iceberg v2" if target == "iceberg" else "Delta"
    return NotPublishable(f"column {name!r} has type {t}, which {title} cannot hold ({why}); publish a table "
                          f"without it, or store it as a type the target holds (see docs/interop.md, "
                          "'Type map')")


def _integer(target: Target, name: str, t: pa.DataType) -> str:
    if pa.types.is_uint64(t):
        raise _refuse(target, name, t, "no signed 64-bit type holds every unsigned value")
    width = t.bit_width + (1 if pa.types.is_unsigned_integer(t) else 0)  # bits a signed type needs
    if target == "iceberg":
        return "int" if width <= 32 else "long"
    return "byte" if width <= 8 else "short" if width <= 16 else "integer" if width <= 32 else "long"


def _primitive(target: Target, name: str, t: pa.DataType) -> str:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_integer(t):
        return _integer(target, name, t)
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_decimal128(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        if t.unit == "ns":
            raise _refuse(target, name, t, "timestamps are kept in microseconds; store them in us")
        if target == "iceberg":
            if t.tz and t.tz not in UTC_NAMES:
                why = ("Iceberg readers such as pyiceberg refuse files whose timestamps carry a zone other "
                       "than UTC; store them with tz='UTC'")
                raise _refuse(target, name, t, why)
            return "timestamptz" if t.tz else "timestamp"
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        if target == "delta":
            raise _refuse(target, name, t, "Delta has no time-of-day type; store it as an integer")
        if t.unit != "us":
            why = ("Iceberg keeps times in microseconds and readers such as pyiceberg refuse files in "
                   "another unit; store them as time64('us')")
            raise _refuse(target, name, t, why)
        return "time"
    raise _refuse(target, name, t, "no matching type")


@dataclass
class FieldIds:
    """Iceberg field ids: kept from `known` (path -> id), new paths numbered after `last`."""

    known: Mapping[Path, int] = field(default_factory=dict)
    last: int = 0
    given: dict[Path, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.last = max([self.last, *self.known.values()])

    def of(self, path: Path) -> int:
        if path not in self.given:
            if path in self.known:
                self.given[path] = self.known[path]
            else:
                self.last += 1
                self.given[path] = self.last
        return self.given[path]


def iceberg_type(path: Path, t: pa.DataType, ids: FieldIds) -> str | dict[str, Any]:
    name = ".".join(path)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        element = (*path, "element")
        return {"type": "list", "element-id": ids.of(element),
                "element": iceberg_type(element, t.value_type, ids),
                "element-required": not t.value_field.nullable}
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [iceberg_field((*path, t.field(i).name), t.field(i), ids)
                                             for i in range(t.num_fields)]}
    return _primitive("iceberg", name, t)


def iceberg_field(path: Path, f: pa.Field, ids: FieldIds) -> dict[str, Any]:
    return {"id": ids.of(path), "name": f.name, "required": not f.nullable,
            "type": iceberg_type(path, f.type, ids)}


def iceberg_schema(schema: pa.Schema, ids: FieldIds, schema_id: int = 0) -> dict[str, Any]:
    return {"type": "struct", "schema-id": schema_id,
            "fields": [iceberg_field((f.name,), f, ids) for f in schema]}


def name_mapping(stored: pa.Schema, ids: FieldIds) -> list[dict[str, Any]]:
    """Iceberg's `schema.name-mapping.default` for every column a data file may store: the table's
    columns and the `_weir_*` meta columns (those get ids too, outside the schema, so readers that
    map every Parquet column, as pyiceberg does, can open the files; they are never shown)."""

    def entry(path: Path, t: pa.DataType) -> dict[str, Any]:
        out: dict[str, Any] = {"field-id": ids.of(path), "names": [path[-1]]}
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            out["fields"] = [entry((*path, "element"), t.value_type)]
        elif pa.types.is_struct(t):
            out["fields"] = [entry((*path, t.field(i).name), t.field(i).type) for i in range(t.num_fields)]
        return out

    return [entry((f.name,), f.type) for f in stored]


def known_ids(mapping: list[Mapping[str, Any]]) -> dict[Path, int]:
    """path -> id of a name mapping (the inverse of `name_mapping`)."""
    out: dict[Path, int] = {}

    def walk(entries: list[Mapping[str, Any]], prefix: Path) -> None:
        for e in entries:
            path = (*prefix, str(e["names"][0]))
            out[path] = int(e["field-id"])
            walk(list(e.get("fields") or ()), path)

    walk(mapping, ())
    return out


def delta_type(path: Path, t: pa.DataType) -> str | dict[str, Any]:
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "elementType": delta_type((*path, "element"), t.value_type),
                "containsNull": t.value_field.nullable}
    if pa.types.is_struct(t):
        return delta_struct(pa.schema([t.field(i) for i in range(t.num_fields)]), path)
    return _primitive("delta", ".".join(path), t)


def delta_struct(schema: pa.Schema, prefix: Path = ()) -> dict[str, Any]:
    return {"type": "struct", "fields": [{"name": f.name, "type": delta_type((*prefix, f.name), f.type),
                                          "nullable": f.nullable, "metadata": {}} for f in schema]}


def needs_timestamp_ntz(schema: pa.Schema) -> bool:
    """Whether Delta needs its `timestampNtz` feature: a timestamp without zone, at any depth."""

    def has(t: pa.DataType) -> bool:
        if pa.types.is_timestamp(t):
            return t.tz is None
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return has(t.value_type)
        if pa.types.is_struct(t):
            return any(has(t.field(i).type) for i in range(t.num_fields))
        return False

    return any(has(f.type) for f in schema)


_READ_INT = {"byte": pa.int8(), "short": pa.int16(), "integer": pa.int32(), "int": pa.int32(),
             "long": pa.int64()}


def read_back_type(t: pa.DataType, target: Target) -> pa.DataType:
    """The Arrow type a target's readers return for a column stored as `t` (the logical type: a
    reader may give the large_ variant of strings, binaries and lists)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        f = t.value_field
        return pa.list_(f.with_type(read_back_type(f.type, target)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(read_back_type(t.field(i).type, target))
                          for i in range(t.num_fields)])
    if pa.types.is_integer(t):
        return _READ_INT[_integer(target, "", t)]
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", "UTC" if t.tz else None)
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        return pa.time64("us")
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    return t
