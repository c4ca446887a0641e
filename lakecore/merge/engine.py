"""The merge entry points: `merge` (a snapshot or a reduced change batch) and `precombine`.

Owns choosing the path: the general one folds every row grouped by hashed key codes; the base
path, for a first batch with unique keys (a base file), folds only the later batches, probes the
base's keys against theirs with a hash lookup, and copies the untouched base rows as they are.
Both give the same result. Must not read files or know about the timeline: callers pass tables.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.merge.assemble import assemble
from lakecore.merge.changes import BoolArray, Changes, read_changes
from lakecore.merge.keys import key_codes, probe
from lakecore.merge.rows import NO_ROW, RowSpace
from lakecore.merge.spec import DELETE, OP_COLUMN, UPSERT, MergeSpec
from lakecore.merge.winners import combine, reduce


def merge(
    batches: Sequence[pa.Table],
    spec: MergeSpec,
    schema: pa.Schema,
    *,
    keep_deletes: bool = False,
    first_unique: bool = False,
) -> pa.Table:
    """Merge change batches given oldest first (see `lakecore.merge` for the contract).

    Returns `schema`'s columns; with `keep_deletes`, also `_weir_op` (last), and the result is
    itself a change batch equivalent to `batches`. Set `first_unique` when `batches[0]` has
    unique keys (a base file always does): its keys are then never hashed or sorted, which is
    what makes snapshot reads fast. A wrong `first_unique=True` gives wrong results; it is not
    checked because checking costs as much as the merge.
    """
    spec.check_schema(schema)
    if first_unique and batches:
        return _merge_onto_base(batches[0], batches[1:], spec, schema, keep_deletes=keep_deletes)
    changes = read_changes(batches, spec, schema)
    codes, n_keys = key_codes([changes.table.column(k) for k in spec.key])
    winners = reduce(changes, codes, n_keys, spec)
    return assemble(RowSpace(None, changes), winners, spec, schema, keep_deletes=keep_deletes)


def precombine(batch: pa.Table, spec: MergeSpec, schema: pa.Schema) -> pa.Table:
    """One write's batch reduced to (usually) one row per key, deletes kept.

    Equals `merge([batch], spec, schema, keep_deletes=True)` except that the columns of a
    commit-time group the batch does not have stay absent: with them filled with nulls, the
    reduced batch would carry that group and wipe its older values. When the keys are already
    unique the batch is returned as it is, only conformed.
    """
    spec.check_schema(schema)
    absent = [
        c
        for g in spec.groups
        if g.ordering is None and not any(c in batch.column_names for c in g.columns)
        for c in g.columns
    ]
    if _unique_keys(batch, spec):
        changes = read_changes([batch], spec, schema)  # validates keys and ops
        ops = np.where(changes.delete, DELETE, UPSERT).astype(np.int8)
        result = changes.table.append_column(OP_COLUMN, pa.array(ops))
    else:
        result = merge([batch], spec, schema, keep_deletes=True)
    return result.drop_columns(absent)


def _merge_onto_base(
    base_batch: pa.Table,
    later_batches: Sequence[pa.Table],
    spec: MergeSpec,
    schema: pa.Schema,
    *,
    keep_deletes: bool,
) -> pa.Table:
    base = read_changes([base_batch], spec, schema)
    later = read_changes(later_batches, spec, schema)
    codes, n_keys = key_codes([later.table.column(k) for k in spec.key])
    reduced = reduce(later, codes, n_keys, spec)
    # Keys whose later rows carry no group leave the base row as it is.
    latest = np.maximum.reduce(reduced.rows)
    touched = np.flatnonzero(latest >= 0)
    reduced = reduced.select(touched)
    keys = [later.table.column(k).take(pa.array(latest[touched])) for k in spec.key]
    position = probe([base.table.column(k) for k in spec.key], keys)
    matched = position >= 0
    base_rows = np.full(len(touched), NO_ROW, dtype=np.int64)
    base_rows[position[matched]] = np.flatnonzero(matched)
    # A base row that is a delete or leaves a group uncarried is not its own snapshot row.
    plain = ~base.delete & np.logical_and.reduce(base.carries)
    untouched = ~matched & plain
    odd = np.flatnonzero(~matched & ~plain)
    base_rows = np.concatenate([base_rows, odd])
    reduced = reduced.padded(len(odd))
    space = RowSpace(base, later)
    winners = combine(space, base_rows, reduced, spec)
    head = _copy(base, untouched, keep_deletes=keep_deletes)
    tail = assemble(space, winners, spec, schema, keep_deletes=keep_deletes)
    return pa.concat_tables([head, tail])


def _copy(base: Changes, rows: BoolArray, *, keep_deletes: bool) -> pa.Table:
    """The base rows selected by mask `rows`, which are their own snapshot rows."""
    table = base.table if rows.all() else base.table.take(pa.array(np.flatnonzero(rows)))
    if keep_deletes:
        table = table.append_column(OP_COLUMN, pa.array(np.full(table.num_rows, UPSERT, dtype=np.int8)))
    return table


def _unique_keys(batch: pa.Table, spec: MergeSpec) -> bool:
    if len(spec.key) == 1:
        return bool(pc.count_distinct(batch.column(spec.key[0])).as_py() == batch.num_rows)
    _, n_keys = key_codes([batch.column(k) for k in spec.key])
    return n_keys == batch.num_rows
