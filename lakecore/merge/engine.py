"""The merge entry points: `merge` (a snapshot or a reduced change batch) and `precombine`.

Owns choosing the path. The general one folds every row, grouped by integer key codes. The base
path, for a first batch with unique keys (a base file), folds only the later batches, looks the
base's keys up among theirs (a lookup table or a hash of the small side, never a sort), decides
the matched keys, and copies the base rows that kept their values as they are. Both paths give
the same result. Must not read files or know about the timeline: callers pass tables.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from lakecore.merge.assemble import Output, assemble
from lakecore.merge.changes import BoolArray, Changes, read_changes
from lakecore.merge.keys import key_codes, matches, unique
from lakecore.merge.rows import NO_ROW, RowSpace
from lakecore.merge.spec import DELETE, OP_COLUMN, UPSERT, MergeSpec
from lakecore.merge.winners import combine, reduce, singles


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
    itself a change batch with the effect of `batches` (it may restate a key in up to three
    rows, so it is not a batch with unique keys). Set `first_unique` when `batches[0]` has unique
    keys (a base file written from a snapshot does): then only the later batches are folded and
    the base is probed and copied, which is what makes snapshot reads fast. A wrong
    `first_unique=True` gives wrong results; it is not checked, as checking costs more than
    the merge.
    """
    return _merge(batches, spec, schema, "changes" if keep_deletes else "snapshot", first_unique)


def _merge(
    batches: Sequence[pa.Table], spec: MergeSpec, schema: pa.Schema, output: Output, first_unique: bool
) -> pa.Table:
    spec.check_schema(schema)
    if first_unique and batches:
        return _merge_onto_base(batches[0], batches[1:], spec, schema, output)
    return _merge_all(read_changes(batches, spec, schema), spec, schema, output)


def precombine(batch: pa.Table, spec: MergeSpec, schema: pa.Schema, *, keys_unique: bool = False) -> pa.Table:
    """One write's batch reduced to (usually) one row per key, deletes kept.

    Equals `merge([batch], spec, schema, keep_deletes=True)` except that the columns of a
    commit-time group the batch does not have stay absent: with them filled with nulls, the
    reduced batch would carry that group and wipe its older values. When the keys are already
    unique (and no row has an op of its own for a group) the batch is returned as it is, only
    conformed. `keys_unique`: the caller has checked that (a file group's rows conformed a row
    group at a time, `write.file_writer`); a wrong True gives a batch that restates keys.
    """
    spec.check_schema(schema)
    absent = [
        c
        for g in spec.groups
        if g.ordering is None and not any(c in batch.column_names for c in g.columns)
        for c in g.columns
    ]
    changes = read_changes([batch], spec, schema)
    if not changes.group_ops and (keys_unique or _unique_keys(changes.table, spec)):
        ops = np.where(changes.delete, DELETE, UPSERT).astype(np.int8)
        result = changes.table.append_column(OP_COLUMN, pa.array(ops))
    else:
        result = _merge_all(changes, spec, schema, "changes")
    return result.drop_columns(absent)


def _merge_all(changes: Changes, spec: MergeSpec, schema: pa.Schema, output: Output) -> pa.Table:
    codes, n_keys = key_codes([changes.table.column(k) for k in spec.key])
    winners = reduce(changes, codes, n_keys, spec)
    return assemble(RowSpace(None, changes), winners, spec, schema, output=output)


def _merge_onto_base(
    base_batch: pa.Table,
    later_batches: Sequence[pa.Table],
    spec: MergeSpec,
    schema: pa.Schema,
    output: Output,
) -> pa.Table:
    base = read_changes([base_batch], spec, schema)
    later = read_changes(later_batches, spec, schema)
    later_keys = [later.table.column(k) for k in spec.key]
    # One later batch (a precombined log, usually) has unique keys: then key k is row k. Several
    # usually share keys, so they are not checked.
    if len(later_batches) == 1 and unique(later_keys):
        reduced = singles(later)
    else:
        codes, n_keys = key_codes(later_keys)
        reduced = reduce(later, codes, n_keys, spec)
    # Keys whose later rows carry no group leave the base row as it is.
    latest = np.maximum.reduce(reduced.rows)
    touched = np.flatnonzero(latest >= 0)
    reduced = reduced.select(touched)
    keys = [later.table.column(k).take(pa.array(latest[touched])) for k in spec.key]
    matched, positions = matches([base.table.column(k) for k in spec.key], keys)
    base_rows = np.full(len(touched), NO_ROW, dtype=np.int64)
    base_rows[positions] = matched
    # A base row that deletes a group or leaves one uncarried is not its own output row.
    plain = _every(base.carries)
    for deleted in base.deleted:
        plain &= ~deleted
    odd = np.flatnonzero(~plain)  # usually none
    if len(odd):
        unmatched = np.ones(base.num_rows, dtype=np.bool_)
        unmatched[matched] = False
        odd = odd[unmatched[odd]]
    base_rows = np.concatenate([base_rows, odd])
    space = RowSpace(base, later)
    winners = combine(space, base_rows, reduced.padded(len(odd)), spec)
    # A plain base row that won every group is its own output row too: copying it with the
    # untouched rows, in base order, is cheaper than gathering it column by column.
    won = (base_rows >= 0) & np.logical_and.reduce([w < space.offset for w in winners.rows])
    won[won] = plain[base_rows[won]]
    as_is = plain.copy()  # the untouched plain rows (arrays over all the base rows are few: each costs)
    as_is[matched] = False
    as_is[base_rows[won]] = True
    head = _copy(base, as_is, spec, output)
    tail = assemble(space, winners.select(np.flatnonzero(~won)), spec, schema, output=output)
    return pa.concat_tables([head, tail])


def _every(flags: Sequence[BoolArray]) -> BoolArray:
    """A new array, True where all of `flags` are (`np.logical_and.reduce` would stack them first)."""
    result = flags[0].copy()
    for more in flags[1:]:
        result &= more
    return result


def _copy(base: Changes, rows: BoolArray, spec: MergeSpec, output: Output) -> pa.Table:
    """The base rows selected by mask `rows`, which are their own snapshot rows (live, every group
    carried as an upsert)."""
    table = base.table if rows.all() else base.table.filter(pa.array(rows))
    if output == "snapshot":
        return table
    table = table.append_column(OP_COLUMN, pa.array(np.full(table.num_rows, UPSERT, dtype=np.int8)))
    if output == "base":
        for name in spec.group_op_columns:
            table = table.append_column(name, pa.nulls(table.num_rows, pa.int8()))
    return table


def _unique_keys(batch: pa.Table, spec: MergeSpec) -> bool:
    return unique([batch.column(k) for k in spec.key])


def merge_to_base(
    batches: Sequence[pa.Table],
    spec: MergeSpec,
    schema: pa.Schema,
    *,
    first_unique: bool = False,
) -> pa.Table:
    """The state a base file stores: one row per key, with `_weir_op` and, for several groups, the
    group op columns (`MergeSpec.group_op_columns`).

    Live keys are their snapshot rows (op 0), with op 1 in the op column of each group whose winner
    is a delete (so the group stays deleted: its delete ordering still beats older events, and a
    later delete of another group can still kill the key), and of each commit-time group no row
    carried (read back, the row would otherwise carry it as an upsert of nulls and keep the key
    alive; a delete acts like nothing here, as later rows of the group beat it). Dead keys keep
    one delete row (op 1) carrying the groups' delete orderings, a tombstone, so an older event
    arriving later still loses to the delete, as it would have before the merge. Nothing lies
    beneath a base file, so the barrier rows a reduced change batch needs are dropped:
    `merge([merge_to_base(A), *B])` equals `merge([*A, *B])`.
    """
    return _merge(batches, spec, schema, "base", first_unique)
