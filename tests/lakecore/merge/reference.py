"""A plain model of the merge contract, one key and one group at a time, to test the engine against.

Slow and obvious on purpose: Python dicts and a literal fold, as the contract in `lakecore.merge`
states it. Results are lists of row dicts with the schema's columns (plus `_weir_op` when deletes
are kept), one per key, sorted by key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakecore.merge import DELETE, OP_COLUMN, GroupSpec, MergeSpec

Row = dict[str, Any]


@dataclass(frozen=True)
class Change:
    seq: int
    row: Row  # the batch's columns only
    delete: bool
    batch_columns: frozenset[str]

    def deletes(self, group: GroupSpec) -> bool:
        """The row's op for `group`: its group op column where set, else its `_weir_op`."""
        op = self.row.get(f"{OP_COLUMN}__{group.name}")
        return self.delete if op is None else op == DELETE


def reference_merge(
    batches: Sequence[pa.Table], spec: MergeSpec, schema: pa.Schema, *, keep_deletes: bool = False
) -> list[Row]:
    by_key: dict[tuple[Any, ...], list[Change]] = {}
    seq = 0
    for batch in batches:
        columns = frozenset(batch.column_names)
        for row in batch.to_pylist():
            key = tuple(row[k] for k in spec.key)
            delete = row.get(OP_COLUMN) == DELETE
            by_key.setdefault(key, []).append(Change(seq, row, delete, columns))
            seq += 1

    result = []
    for key in sorted(by_key, key=sort_key):
        winners = [fold([c for c in by_key[key] if carries(c, g)], g) for g in spec.groups]
        if all(w is None for w in winners):
            continue  # no row of this key carries any group: it is not a result key
        live = any(w is not None and not w.deletes(g) for g, w in zip(spec.groups, winners, strict=True))
        if not live and not keep_deletes:
            continue
        row_winner = max((w for w in winners if w is not None), key=lambda c: c.seq)
        out: Row = {name: row_winner.row.get(name) for name in schema.names}
        for name, value in zip(spec.key, key, strict=True):
            out[name] = value
        for group, winner in zip(spec.groups, winners, strict=True):
            upsert = winner is not None and not winner.deletes(group)
            for column in group.columns:
                out[column] = winner.row.get(column) if upsert and winner is not None else None
            if group.ordering is not None:
                out[group.ordering] = ordering(winner, group) if winner is not None else None
        if keep_deletes:
            out[OP_COLUMN] = 0 if live else 1
        result.append(out)
    return result


def carries(change: Change, group: GroupSpec) -> bool:
    if change.deletes(group):
        return True
    if group.ordering is None:
        return any(c in change.batch_columns for c in group.columns)
    return change.row.get(group.ordering) is not None


def ordering(change: Change, group: GroupSpec) -> Any:
    return None if group.ordering is None else change.row.get(group.ordering)


def fold(changes: list[Change], group: GroupSpec) -> Change | None:
    current: Change | None = None
    for change in changes:
        if current is None:
            current = change
            continue
        mine, theirs = ordering(change, group), ordering(current, group)
        if mine is None or theirs is None or mine >= theirs:
            current = change
    return current


def sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((type(v).__name__, v) for v in key)
