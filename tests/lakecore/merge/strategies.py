"""Hypothesis strategies for merge tests: random specs and batch sequences whose keys collide.

Small key spaces and small ordering ranges make collisions and ties the rule; partial rows (null
ordering values), batches that omit columns, key-only deletes and deletes with orderings all
appear; on request, per-group op columns too (a base state holds them). Also: helpers that turn
merge output into comparable rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from lakecore.merge import OP_COLUMN, GroupSpec, MergeSpec
from tests.lakecore.merge.reference import Row, sort_key

_INT_VALUES = st.integers(min_value=0, max_value=3)
_STR_VALUES = st.sampled_from(["a", "b", "c"])


@dataclass(frozen=True)
class Case:
    """A spec, its schema, and how to draw key and column values."""

    spec: MergeSpec
    schema: pa.Schema

    @property
    def single_group(self) -> bool:
        return len(self.spec.groups) == 1

    @property
    def event_time_only(self) -> bool:
        return all(g.ordering is not None for g in self.spec.groups)

    @property
    def group_columns(self) -> list[str]:
        """Key and grouped columns: what a reduced batch reproduces exactly in every position."""
        return [n for n in self.schema.names if n in self.spec.key or n in self.spec.grouped]


@st.composite
def tables(draw: st.DrawFn) -> Case:
    key_kind = draw(st.sampled_from(["int", "str", "composite"]))
    fields: list[pa.Field] = {
        "int": [pa.field("k", pa.int64())],
        "str": [pa.field("k", pa.string())],
        "composite": [pa.field("k1", pa.int64()), pa.field("k2", pa.string())],
    }[key_kind]
    key = tuple(f.name for f in fields)
    groups = []
    hidden: list[pa.Field] = []
    for i in range(draw(st.integers(min_value=1, max_value=3))):
        mode = draw(st.sampled_from(["commit", "event_inline", "event_hidden"]))
        columns = [pa.field(f"g{i}_a", pa.int64())]
        if draw(st.booleans()):
            columns.append(pa.field(f"g{i}_b", pa.string()))
        ordering = None
        if mode != "commit":
            kind = draw(st.sampled_from([pa.int64(), pa.string()]))
            ordering = f"g{i}_ts" if mode == "event_inline" else f"_ord_g{i}"
            (columns if mode == "event_inline" else hidden).append(pa.field(ordering, kind))
        fields.extend(columns)
        groups.append(GroupSpec(f"g{i}", tuple(c.name for c in columns), ordering))
    fields.extend(hidden)
    fields.append(pa.field("u", pa.int64()))
    return Case(MergeSpec(key=key, groups=tuple(groups)), pa.schema(fields))


def _value(field: pa.Field) -> st.SearchStrategy[Any]:
    values = _INT_VALUES if pa.types.is_integer(field.type) else _STR_VALUES
    return st.one_of(st.none(), values, values)  # null one time in three


def _key(table: Case) -> st.SearchStrategy[tuple[Any, ...]]:
    if len(table.spec.key) == 2:
        return st.tuples(st.integers(0, 1), st.sampled_from(["x", "y"]))
    if table.schema.field(table.spec.key[0]).type == pa.string():
        return st.tuples(st.sampled_from(["p", "q", "r"]))
    return st.tuples(st.integers(0, 2))


@st.composite
def batch(draw: st.DrawFn, table: Case, *, unique_keys: bool = False, group_ops: bool = False) -> pa.Table:
    schema = table.schema
    keys = draw(st.lists(_key(table), max_size=6, unique=unique_keys))
    others = [f for f in schema if f.name not in table.spec.key]
    present = [f for f in others if draw(st.sampled_from([True, True, False]))]
    data: dict[str, list[Any]] = {k: [key[i] for key in keys] for i, k in enumerate(table.spec.key)}
    for f in present:
        data[f.name] = [draw(_value(f)) for _ in keys]
    arrays = {name: pa.array(values, type=schema.field(name).type) for name, values in data.items()}
    if draw(st.sampled_from([True, True, False])):
        ops = [draw(st.sampled_from([0, 0, 1])) for _ in keys]
        arrays[OP_COLUMN] = pa.array(ops, type=pa.int8())
    if group_ops:
        for group in table.spec.groups:
            if draw(st.booleans()):
                values = [draw(st.sampled_from([None, None, 0, 1])) for _ in keys]
                arrays[group.op_column] = pa.array(values, type=pa.int8())
    return pa.table(arrays)


@st.composite
def histories(
    draw: st.DrawFn,
    *,
    min_batches: int = 1,
    max_batches: int = 5,
    unique_first: bool = False,
    group_ops: bool = False,
) -> tuple[Case, list[pa.Table]]:
    """Random batches; with `group_ops`, every batch may hold per-group op columns."""
    table = draw(tables())
    n = draw(st.integers(min_value=min_batches, max_value=max_batches))
    batches = [draw(batch(table, unique_keys=unique_first and i == 0, group_ops=group_ops)) for i in range(n)]
    return table, batches


def rows(result: pa.Table, key: Sequence[str]) -> list[Row]:
    """Output rows sorted by key (for results with one row per key)."""
    return sorted(result.to_pylist(), key=lambda r: sort_key(tuple(r[k] for k in key)))


def rows_by_key(result: pa.Table, key: Sequence[str]) -> dict[tuple[Any, ...], list[Row]]:
    """Output rows of each key, in output order (a restated key may have up to three)."""
    grouped: dict[tuple[Any, ...], list[Row]] = {}
    for row in result.to_pylist():
        grouped.setdefault(tuple(row[k] for k in key), []).append(row)
    return grouped


def collapse(result: pa.Table, spec: MergeSpec) -> list[Row]:
    """A kept-deletes result read back as one row per key, as the contract states it.

    The last row decides the op; a live key's upsert row leaves the orderings of its deleted
    groups to the delete row before it.
    """
    out = []
    for restated in rows_by_key(result, spec.key).values():
        last = dict(restated[-1])
        if last[OP_COLUMN] == 0 and len(restated) > 1:
            for group in spec.groups:
                if group.ordering is not None and last[group.ordering] is None:
                    last[group.ordering] = restated[-2][group.ordering]
        out.append(last)
    return sorted(out, key=lambda r: sort_key(tuple(r[k] for k in spec.key)))


def only(rows_: list[Row], columns: Sequence[str]) -> list[Row]:
    return [{c: r[c] for c in columns} for r in rows_]
