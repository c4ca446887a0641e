"""Building the merged table from the winners.

Owns the shape of the merge output: which keys appear, which winner each column is gathered
from, and how a result is restated as a change batch when deletes are kept. Must not decide
winners (`winners.py`) or read batches (`changes.py`).

Snapshot rows (deletes dropped): one per live key. Key and ungrouped columns come from the row
winner (the newest of the groups' winners); a group's columns from its winner if that is an
upsert, else null; a group's ordering column from its winner whatever its kind.

Change rows (deletes kept): each key restated by at most three rows, in this order, so that the
result read as a batch has the effect of the rows it replaces:
  1. a reset marker, only if some event-time group's winner follows a key-only delete: a delete
     whose ordering is null for those groups (so they forget anything older) and the winner's
     ordering elsewhere (so the other groups compare exactly as before);
  2. a delete row, if some group's winner is a delete: the ordering of every group's winner;
  3. an upsert row, if the key is live: the upsert winners' columns and orderings only, so the
     groups whose winner is a delete stay with row 2.
Most keys need one row. The marker and the delete row ahead of an upsert exist because one row
with one op cannot say "group a was deleted at 7 while group b lives at 5".

Base rows (a base file's state): one row per key some row carried, as the snapshot row, with
`_weir_op` 1 for a dead key (a tombstone: every group's delete ordering) and, with several groups,
one op column per group (`_weir_op__<group>`) saying which groups of a live key are deleted (a
commit-time group no row carried counts as deleted: a base row carries every commit-time group).
That one row is what lets a base file say "group a was deleted at 7 while group b lives at 5": merged
with later changes it acts exactly like the rows it replaces, since nothing lies beneath a base.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lakecore.merge.changes import BoolArray
from lakecore.merge.keys import IntArray
from lakecore.merge.rows import NO_ROW, RowSpace
from lakecore.merge.spec import DELETE, OP_COLUMN, UPSERT, MergeSpec
from lakecore.merge.winners import Winners

_MARKER, _DELETE_ROW, _UPSERT_ROW = 0, 1, 2

Output = Literal["snapshot", "changes", "base"]


@dataclass(frozen=True)
class _Picks:
    """Per output row, the row id each column is gathered from (NO_ROW gives null)."""

    row: IntArray  # key and ungrouped columns
    order: tuple[IntArray, ...]  # per group: its ordering column
    value: tuple[IntArray, ...]  # per group: its other columns


def output_schema(schema: pa.Schema, spec: MergeSpec, output: Output) -> pa.Schema:
    """The merge output's schema: the table's, plus the op column when deletes are kept, plus the
    group op columns of a base state."""
    if output == "snapshot":
        return schema
    extra = [OP_COLUMN, *(spec.group_op_columns if output == "base" else ())]
    for name in extra:
        schema = schema.append(pa.field(name, pa.int8()))
    return schema


def assemble(space: RowSpace, winners: Winners, spec: MergeSpec, schema: pa.Schema, *,
             output: Output) -> pa.Table:
    """The output rows of the keys in `winners` (keys no row carried are left out)."""
    upsert = tuple((w >= 0) & ~space.deleted(i, w) for i, w in enumerate(winners.rows))
    if output == "changes":
        picks, op = _change_rows(space, winners, upsert)
        return _build(space, spec, schema, picks, output, [pa.array(op, type=pa.int8())])
    live = np.logical_or.reduce(upsert)
    carried = live if output == "snapshot" else np.logical_or.reduce([w >= 0 for w in winners.rows])
    keys = np.flatnonzero(carried)
    picks = _Picks(
        row=np.maximum.reduce(winners.rows)[keys],
        order=tuple(w[keys] for w in winners.rows),
        value=tuple(np.where(u, w, NO_ROW)[keys] for u, w in zip(upsert, winners.rows, strict=True)),
    )
    if output == "snapshot":
        return _build(space, spec, schema, picks, output, [])
    live = live[keys]
    ops = [pa.array(np.where(live, UPSERT, DELETE).astype(np.int8))]
    if spec.group_op_columns:
        for group, u, w in zip(spec.groups, upsert, winners.rows, strict=True):
            # A commit-time group no row carried is marked deleted too: read back, a base row
            # carries every commit-time group (its batch has their columns), so left unmarked it
            # would be an upsert of nulls that keeps the key alive. As a delete it acts like
            # nothing: it is not live, no older row lies beneath a base, and later rows beat it.
            not_upsert = ~u[keys] if group.ordering is None else (w[keys] >= 0) & ~u[keys]
            deleted = live & not_upsert
            ops.append(pa.array(np.full(len(keys), DELETE, dtype=np.int8), mask=~deleted))
    return _build(space, spec, schema, picks, output, ops)


def _change_rows(
    space: RowSpace, winners: Winners, upsert: tuple[BoolArray, ...]
) -> tuple[_Picks, npt.NDArray[np.int8]]:
    """Picks and ops of the change rows (marker, delete, upsert) restating each key."""
    deleted = [(w >= 0) & ~u for u, w in zip(upsert, winners.rows, strict=True)]
    needs_reset = [
        reset & space.ordered(i, w)
        for i, (reset, w) in enumerate(zip(winners.reset, winners.rows, strict=True))
    ]
    wanted = {
        _MARKER: np.logical_or.reduce(needs_reset),
        _DELETE_ROW: np.logical_or.reduce(deleted),
        _UPSERT_ROW: np.logical_or.reduce(upsert),
    }
    # Lay each key's rows out consecutively, in kind order, without sorting.
    counts = np.zeros(winners.num_keys, dtype=np.int64)
    for has in wanted.values():
        counts += has
    key_of = np.repeat(np.arange(winners.num_keys, dtype=np.int64), counts)
    kind = np.empty(len(key_of), dtype=np.int8)
    slot = np.cumsum(counts) - counts
    for code, has in wanted.items():
        kind[slot[has]] = code
        slot += has
    is_upsert = kind == _UPSERT_ROW
    is_delete = kind == _DELETE_ROW
    order = []
    value = []
    for u, w, reset in zip(upsert, winners.rows, needs_reset, strict=True):
        upsert_winner = np.where(u, w, NO_ROW)[key_of]
        marker_order = np.where(reset, NO_ROW, w)[key_of]
        order.append(np.select([is_upsert, is_delete], [upsert_winner, w[key_of]], marker_order))
        value.append(np.where(is_upsert, upsert_winner, NO_ROW))
    row = np.maximum.reduce(winners.rows)[key_of]
    picks = _Picks(row=row, order=tuple(order), value=tuple(value))
    return picks, np.where(is_upsert, UPSERT, DELETE).astype(np.int8)


def _build(
    space: RowSpace,
    spec: MergeSpec,
    schema: pa.Schema,
    picks: _Picks,
    output: Output,
    ops: list[pa.Array],
) -> pa.Table:
    source: dict[str, IntArray] = {}
    for i, group in enumerate(spec.groups):
        source.update((c, picks.value[i]) for c in group.columns)
        if group.ordering is not None:
            source[group.ordering] = picks.order[i]
    # Columns gathered from the same rows share one index array.
    by_rows: dict[int, tuple[IntArray, list[str]]] = {}
    for name in schema.names:
        rows = source.get(name, picks.row)
        by_rows.setdefault(id(rows), (rows, []))[1].append(name)
    gathered: dict[str, pa.Array | pa.ChunkedArray] = {}
    for rows, names in by_rows.values():
        gathered.update(zip(names, space.gather(names, rows), strict=True))
    columns = [gathered[name] for name in schema.names]
    return pa.Table.from_arrays([*columns, *ops], schema=output_schema(schema, spec, output))
