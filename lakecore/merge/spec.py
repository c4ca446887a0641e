"""Merge specs: which columns a write updates together, and what orders them.

Owns the vocabulary of the merge engine (record key, column group, ordering field, op column)
and the validation of a spec, alone and against a table schema. It must not look at data:
deciding winners belongs to `winners.py`.

A group's ordering column always travels with that group's winner: when it is not one of the
group's `columns` (the hidden `_weir_ord__<group>` column of a partial-update table) it is still
part of the group and is gathered from the same row as the group's columns.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pyarrow as pa

from lakecore.errors import InvalidMergeSpec

OP_COLUMN = "_weir_op"
"""int8 column of a change batch: 0 = upsert, 1 = delete. Absent means all rows are upserts."""
UPSERT = 0
DELETE = 1


def group_op_column(group: str) -> str:
    """Optional int8 column of a change batch: where not null, the row's op for column group `group`
    (else `_weir_op` decides). Base states use it to keep "this group's winner is a delete" on a
    live key's one row (see `merge_to_base`)."""
    return f"{OP_COLUMN}__{group}"


@dataclass(frozen=True)
class GroupSpec:
    """A column group: columns one writer updates together, guarded by one ordering field.

    `ordering=None` orders the group by commit time (the newest row wins); otherwise the row
    with the greatest value in column `ordering` wins and ties go to the newer row.
    """

    name: str
    columns: tuple[str, ...]
    ordering: str | None

    def __post_init__(self) -> None:
        if not self.name:
            raise InvalidMergeSpec("a column group needs a name; give each GroupSpec a non-empty name")
        if not self.columns:
            raise InvalidMergeSpec(
                f"column group {self.name!r} has no columns; list the data columns it updates"
            )
        repeated = sorted(c for c, n in Counter(self.columns).items() if n > 1)
        if repeated:
            raise InvalidMergeSpec(
                f"column group {self.name!r} lists {repeated} more than once; list each column once"
            )
        if OP_COLUMN in self.columns or self.ordering == OP_COLUMN:
            raise InvalidMergeSpec(
                f"column group {self.name!r} uses {OP_COLUMN!r}, which is the op marker; "
                "remove it from the group"
            )

    @property
    def op_column(self) -> str:
        """The column holding this group's own op in a row (see `group_op_column`)."""
        return group_op_column(self.name)

    @property
    def travelling(self) -> tuple[str, ...]:
        """The columns gathered from this group's winner: its columns and its ordering column."""
        if self.ordering is None or self.ordering in self.columns:
            return self.columns
        return (*self.columns, self.ordering)


@dataclass(frozen=True)
class MergeSpec:
    """How a table's records merge: the record key and the column groups."""

    key: tuple[str, ...]
    groups: tuple[GroupSpec, ...]

    def __post_init__(self) -> None:
        if not self.key:
            raise InvalidMergeSpec("a merge spec needs at least one record key column")
        if len(set(self.key)) != len(self.key):
            raise InvalidMergeSpec(f"record key {self.key} repeats a column; list each key column once")
        if OP_COLUMN in self.key:
            raise InvalidMergeSpec(f"{OP_COLUMN!r} cannot be a record key column; it is the op marker")
        if not self.groups:
            raise InvalidMergeSpec(
                "a merge spec needs at least one column group; "
                "use one group with all data columns for a plain table"
            )
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise InvalidMergeSpec(f"column group names {names} repeat; give each group its own name")
        owner: dict[str, str] = {}
        for group in self.groups:
            for column in group.columns:
                if column in owner:
                    raise InvalidMergeSpec(
                        f"column {column!r} is in groups {owner[column]!r} and {group.name!r}; "
                        "a column belongs to at most one group"
                    )
                owner[column] = group.name
        for group in self.groups:
            for column in group.travelling:
                if column in self.key:
                    raise InvalidMergeSpec(
                        f"record key column {column!r} is in group {group.name!r}; "
                        "key columns never belong to a group"
                    )
        orderings = [g.ordering for g in self.groups if g.ordering is not None]
        for group in self.groups:
            ordering = group.ordering
            if ordering is None:
                continue
            if orderings.count(ordering) > 1:
                raise InvalidMergeSpec(
                    f"ordering column {ordering!r} is shared by several groups; a group's ordering "
                    "column travels with its winner, so give each group its own (e.g. _weir_ord__<group>)"
                )
            if ordering in owner and owner[ordering] != group.name:
                raise InvalidMergeSpec(
                    f"ordering column {ordering!r} of group {group.name!r} belongs to group "
                    f"{owner[ordering]!r}; use a column of the same group or a hidden one"
                )

    @property
    def group_op_columns(self) -> tuple[str, ...]:
        """The per-group op columns a base state holds: one per group when there are several (with one
        group, a live key's group is never deleted, so `_weir_op` says everything)."""
        return tuple(g.op_column for g in self.groups) if len(self.groups) > 1 else ()

    @property
    def grouped(self) -> frozenset[str]:
        """Every column that travels with some group's winner."""
        return frozenset(c for g in self.groups for c in g.travelling)

    def check_schema(self, schema: pa.Schema) -> None:
        """Raise InvalidMergeSpec unless `schema` can hold this spec's tables."""
        names = set(schema.names)
        if len(names) != len(schema.names):
            raise InvalidMergeSpec(f"schema repeats column names {schema.names}; name each column once")
        ops = sorted(names & {OP_COLUMN, *(g.op_column for g in self.groups)})
        if ops:
            raise InvalidMergeSpec(
                f"the table schema lists {ops}; op columns are added by the merge, drop them from the schema"
            )
        missing = [c for c in (*self.key, *sorted(self.grouped)) if c not in names]
        if missing:
            raise InvalidMergeSpec(
                f"columns {missing} of the merge spec are not in the table schema; add them"
            )
        for group in self.groups:
            if group.ordering is None:
                continue
            kind = schema.field(group.ordering).type
            if pa.types.is_nested(kind) or pa.types.is_null(kind) or pa.types.is_dictionary(kind):
                raise InvalidMergeSpec(
                    f"ordering column {group.ordering!r} has type {kind}, which has no order; "
                    "use a number, timestamp or string"
                )
