"""Conditions written as text: `weir table read --where` and `Table.read/scan(filter="...")`.
`COLUMN OP VALUE` (OP one of = == != <> < <= > >=), `COLUMN in (V1, V2, ...)`, `COLUMN is null`,
`COLUMN is not null`; several conditions must all hold. A value is a number, a word, or a quoted string
('...' or "..."), converted to the column's type (dates and timestamps in ISO form; meta columns, with
meta columns read, as strings; the commit time without them as its int64). The result is a
`pyarrow.compute.Expression`, so the read skips the files and row groups whose statistics rule the
condition out, as a filter written as an expression does."""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import COMMIT_TIME, META_COLUMNS, did_you_mean
from lakecore.errors import InvalidInput

_NAME = r"(?P<name>[A-Za-z_][\w.]*|`[^`]+`)"
_COMPARE = re.compile(rf"^\s*{_NAME}\s*(?P<op>==|=|!=|<>|<=|>=|<|>)\s*(?P<value>.+?)\s*$")
_IN = re.compile(rf"^\s*{_NAME}\s+in\s*\((?P<values>.*)\)\s*$", re.IGNORECASE)
_NULL = re.compile(rf"^\s*{_NAME}\s+is\s+(?P<not>not\s+)?null\s*$", re.IGNORECASE)
_ITEM = re.compile(r"\s*('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|[^,]+?)\s*(?:,|$)")
_OPS = {"=": operator.eq, "==": operator.eq, "!=": operator.ne, "<>": operator.ne, "<": operator.lt,
        "<=": operator.le, ">": operator.gt, ">=": operator.ge}



@dataclass(frozen=True)
class Wording:
    """How errors name a condition and what they suggest: the CLI's flags, or the Python API's arguments."""

    label: str
    with_meta: str
    example: str


CLI = Wording("--where", "add --with-meta",
              "e.g. --where 'amount > 100' --where \"region in ('eu', 'us')\" --where 'note is null'")
API = Wording("filter", "pass with_meta=True",
              "e.g. filter=\"amount > 100\", or filter=[\"amount > 100\", \"region in ('eu', 'us')\"], or "
              "a pyarrow.compute expression such as pc.field(\"amount\") > 100")


def conditions_filter(conditions: Sequence[str], schema: pa.Schema, *, meta: bool,
                      wording: Wording = API) -> pc.Expression | None:
    """All of `conditions` as one filter over `schema`'s columns (and with `meta`, the meta columns);
    None when there are none."""
    result: pc.Expression | None = None
    for text in conditions:
        one = _condition(text, schema, meta, wording)
        result = one if result is None else result & one
    return result


def _condition(text: str, schema: pa.Schema, meta: bool, w: Wording) -> pc.Expression:
    if m := _NULL.match(text):
        field = _field(m["name"], schema, text, meta, w)
        return ~pc.field(field.name).is_null() if m["not"] else pc.field(field.name).is_null()
    if m := _IN.match(text):
        field = _field(m["name"], schema, text, meta, w)
        items = [v for v in _ITEM.findall(m["values"]) if v.strip()]
        if not items:
            raise InvalidInput(f"{w.label} {text!r}: 'in' needs at least one value; {w.example}")
        values = pa.array([_value(v, field, text, w).as_py() for v in items], field.type)
        return pc.field(field.name).isin(values)
    if m := _COMPARE.match(text):
        field = _field(m["name"], schema, text, meta, w)
        compared: pc.Expression = _OPS[m["op"]](pc.field(field.name), _value(m["value"], field, text, w))
        return compared
    raise InvalidInput(f"{w.label} {text!r} is not COLUMN OP VALUE, COLUMN in (...) or COLUMN is [not] "
                       f"null; {w.example}")


def _field(name: str, schema: pa.Schema, text: str, meta: bool, w: Wording) -> pa.Field:
    name = name[1:-1] if name.startswith("`") else name
    if name in schema.names:
        return schema.field(name)
    if name in META_COLUMNS:  # strings in what a read gives with them; the commit time is in every file
        if meta or name == COMMIT_TIME:
            return pa.field(name, pa.string() if meta else pa.int64())
        raise InvalidInput(f"{w.label} {text!r}: {name!r} is a meta column; {w.with_meta} to filter on it")
    raise InvalidInput(f"{w.label} {text!r}: no column {name!r}{did_you_mean([name], schema.names)}; the "
                       f"table has {schema.names}")


def _value(raw: str, field: pa.Field, text: str, w: Wording) -> pa.Scalar:
    raw = raw.strip()
    quoted = len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\""
    value = raw[1:-1].replace(raw[0] * 2, raw[0]) if quoted else raw
    if pa.types.is_boolean(field.type) and not quoted:
        value = value.lower()
    try:
        return pa.scalar(value, pa.string()).cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidInput(f"{w.label} {text!r}: {raw} is not a value of column {field.name!r} "
                           f"({field.type}): {exc}") from None
