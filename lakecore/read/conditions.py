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
    None when there are none. One condition may join several with `and` and `or` (`and` binds first;
    no parentheses): `"v = 'a' or v = 'b' and id > 1"`."""
    result: pc.Expression | None = None
    for text in conditions:
        either: pc.Expression | None = None
        for alternative in _joined(text, "or"):
            every: pc.Expression | None = None
            for part in _joined(alternative, "and"):
                if not part.strip():
                    raise InvalidInput(f"{wording.label} {text!r}: a condition is missing beside 'and' or "
                                       f"'or'; {wording.example}")
                one = _condition(part, schema, meta, wording)
                every = one if every is None else every & one
            assert every is not None
            either = every if either is None else either | every
        assert either is not None
        result = either if result is None else result & either
    return result


_JOIN = {word: re.compile(rf"\s+{word}(?:\s+|\s*$)", re.IGNORECASE) for word in ("and", "or")}


def _joined(text: str, word: str) -> list[str]:
    """`text` split at each `word` (and, or) outside quotes and parentheses: a quoted value may hold
    the word; `in (...)`'s list is one part."""
    parts, start, depth, quote, i = [], 0, 0, "", 0
    while i < len(text):
        c = text[i]
        if quote:
            quote = "" if c == quote else quote   # a doubled quote closes and opens again: the same
        elif c in "'\"`":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and c.isspace() and (m := _JOIN[word].match(text, i)):
            parts.append(text[start:i])
            start = i = m.end()
            continue
        i += 1
    parts.append(text[start:])
    return parts


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
    kind = field.type
    try:
        try:
            return pa.scalar(value, pa.string()).cast(kind)
        except pa.ArrowInvalid as exc:   # a time without an offset is UTC, as CSV and JSON inputs read it
            if not (pa.types.is_timestamp(kind) and kind.tz and "expected a zone offset" in str(exc)):
                raise
            return pa.scalar(value, pa.string()).cast(pa.timestamp(kind.unit)).cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise InvalidInput(f"{w.label} {text!r}: {raw} is not a value of column {field.name!r} "
                           f"({field.type}): {exc}") from None

