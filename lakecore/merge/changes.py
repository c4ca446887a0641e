"""Change batches as the merge engine reads them.

Owns conforming a batch to the table schema (select, cast, fill absent columns with nulls) and
deriving, per row, what the fold needs: is the row a delete of each group, which groups does it
carry, and does it hold an ordering value for each group. It must not decide winners (`winners.py`
does).

A row's op for group g is its value in g's op column (`_weir_op__<g>`) where the batch has one and
it is not null, else its `_weir_op`. A row carries g iff its op for g is a delete, or it is an
upsert for g and either g orders by commit time and the row's batch has at least one of g's
columns, or g orders by event time and the row's value in g's ordering column is not null.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import InvalidChanges
from lakecore.merge.spec import DELETE, OP_COLUMN, UPSERT, MergeSpec

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Changes:
    """Rows of change batches in commit order (row i is older than row i + 1), schema-conformed.

    `delete` is the row's `_weir_op`; `deleted[i]`, `carries[i]` and `ordered[i]` follow
    `spec.groups[i]`: the row's op for the group is a delete, the row carries the group, the row
    holds an ordering value for it (never, for a commit-time group). A carrying row that is not
    ordered is a barrier: a key-only delete, or any row of a commit-time group.
    """

    table: pa.Table
    delete: BoolArray
    deleted: tuple[BoolArray, ...]
    carries: tuple[BoolArray, ...]
    ordered: tuple[BoolArray, ...]

    @property
    def group_ops(self) -> bool:
        """Some row's op for a group differs from its `_weir_op`."""
        return any(bool((d != self.delete).any()) for d in self.deleted)

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)


def conform(batch: pa.Table, schema: pa.Schema) -> pa.Table:
    """`batch` with exactly `schema`'s columns: extra columns dropped, absent ones null."""
    columns = []
    for field in schema:
        if field.name in batch.column_names:
            column = batch.column(field.name)
            if column.type != field.type:
                column = _cast(column, field)
            columns.append(column)
        else:
            columns.append(pa.chunked_array([pa.nulls(batch.num_rows, field.type)]))
    return pa.Table.from_arrays(columns, schema=schema)


def _cast(column: pa.ChunkedArray, field: pa.Field) -> pa.ChunkedArray:
    try:
        return column.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise InvalidChanges(
            f"column {field.name!r} of a change batch has type {column.type}, which does not cast "
            f"to the table's {field.type} ({exc}); convert it before merging"
        ) from exc


def read_changes(batches: Sequence[pa.Table], spec: MergeSpec, schema: pa.Schema) -> Changes:
    """Conform `batches` (oldest first) and concatenate them into one `Changes`."""
    tables = []
    deletes: list[BoolArray] = []
    deleted: list[list[BoolArray]] = [[] for _ in spec.groups]
    carries: list[list[BoolArray]] = [[] for _ in spec.groups]
    ordered: list[list[BoolArray]] = [[] for _ in spec.groups]
    for batch in batches:
        _check_keys(batch, spec)
        delete = _ops(batch, OP_COLUMN)
        for i, group in enumerate(spec.groups):
            group_delete = _ops(batch, group.op_column, delete)
            if group.ordering is None:
                present = any(c in batch.column_names for c in group.columns)
                has_order = np.zeros(batch.num_rows, dtype=np.bool_)
                carries[i].append(np.full(batch.num_rows, True) if present else group_delete)
            else:
                has_order = _valid(batch, group.ordering)
                carries[i].append(group_delete | has_order)
            ordered[i].append(has_order)
            deleted[i].append(group_delete)
        deletes.append(delete)
        tables.append(conform(batch, schema))
    table = pa.concat_tables(tables) if tables else schema.empty_table()
    _check_orderings(table, spec)
    return Changes(
        table=table,
        delete=_concat(deletes),
        deleted=tuple(_concat(d) for d in deleted),
        carries=tuple(_concat(c) for c in carries),
        ordered=tuple(_concat(o) for o in ordered),
    )


def _check_keys(batch: pa.Table, spec: MergeSpec) -> None:
    for name in spec.key:
        if name not in batch.column_names:
            raise InvalidChanges(
                f"change batch has no record key column {name!r}; every batch must carry the full key"
            )
        if batch.column(name).null_count:
            raise InvalidChanges(
                f"record key column {name!r} has nulls; fill or drop those rows before merging"
            )


def _ops(batch: pa.Table, name: str, default: BoolArray | None = None) -> BoolArray:
    """Whether each row's op in column `name` is a delete. Without a `default` (the row op), the
    column may not hold nulls; with one, a null (or an absent column) takes the default."""
    absent = name not in batch.column_names
    if default is not None and (absent or batch.column(name).null_count == batch.num_rows):
        return default
    if absent:
        return np.zeros(batch.num_rows, dtype=np.bool_)
    op = batch.column(name)
    if op.null_count and default is None:
        raise InvalidChanges(f"{name} has nulls; set 0 (upsert) or 1 (delete) on every row")
    op = op.cast(pa.int8())
    bounds = pc.min_max(op)  # one pass, no temporaries: every value is UPSERT (0) or DELETE (1)
    if op.null_count < len(op) and (bounds["min"].as_py() < UPSERT or bounds["max"].as_py() > DELETE):
        raise InvalidChanges(f"{name} holds values other than 0 (upsert) and 1 (delete); fix the writer")
    result: BoolArray = op.fill_null(UPSERT).to_numpy() == DELETE
    if default is not None and op.null_count:
        result = np.where(_valid(batch, name), result, default)
    return result


def _valid(batch: pa.Table, name: str) -> BoolArray:
    if name not in batch.column_names:
        return np.zeros(batch.num_rows, dtype=np.bool_)
    column = batch.column(name)
    if column.null_count == 0:
        return np.full(batch.num_rows, True)
    return np.asarray(pc.is_valid(column).to_numpy(zero_copy_only=False), dtype=np.bool_)


def _check_orderings(table: pa.Table, spec: MergeSpec) -> None:
    # NaN has no place in an order: `>=` against it is false both ways, so the fold would depend
    # on the path taken. Refuse it rather than pick a winner silently.
    for group in spec.groups:
        if group.ordering is None:
            continue
        column = table.column(group.ordering)
        if pa.types.is_floating(column.type) and pc.any(pc.is_nan(column)).as_py():
            raise InvalidChanges(
                f"ordering column {group.ordering!r} holds NaN; use null for 'no ordering value'"
            )


def _concat(parts: list[BoolArray]) -> BoolArray:
    if not parts:
        return np.zeros(0, dtype=np.bool_)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
