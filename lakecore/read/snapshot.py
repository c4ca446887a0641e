"""The pieces of table queries over a file-system view: which slices (partition pruning), one slice's
merged rows with their meta columns, many slices at once, and the finishing steps every query shares
(meta columns, column-group defaults, filter, projection). `lakecore.read.scan` streams them.

Slices are independent, so they are read concurrently (one per core); the merge inside each is vectorized.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import (
    COMMIT_TIME,
    FILE_NAME,
    META_COLUMNS,
    OP,
    PARTITION_PATH,
    RECORD_KEY,
    TableConfig,
    did_you_mean,
    group_ordering_column,
)
from lakecore.errors import InvalidInput
from lakecore.formats import RowGroupFilter
from lakecore.layout import FileSlice, FileSystemView, parse_partition_path
from lakecore.read.slices import file_names, read_slice
from lakecore.read.spec import file_schema
from lakecore.storage import Storage

# Slices are merged in parallel, one per core: decoding releases the GIL, the merge mostly does too.
slice_pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 2, thread_name_prefix="weir-slice")


def prune(view: FileSystemView, config: TableConfig,
          partitions: Mapping[str, Any] | None) -> list[FileSlice]:
    """Slices whose partition matches every `field: value` (or `field: [values]`) given."""
    if not partitions:
        return list(view.slices)
    unknown = [k for k in partitions if k not in config.partition_fields]
    if unknown:
        raise InvalidInput(f"{unknown} are not partition fields of table {config.name!r} "
                           f"({list(config.partition_fields)}); filter other columns with `filter=`")
    wanted = {k: {str(x) for x in (v if isinstance(v, (list, tuple, set, frozenset)) else [v])}
              for k, v in partitions.items()}
    out = []
    for s in view.slices:
        values = parse_partition_path(s.partition)
        if all(values.get(k) in vs for k, vs in wanted.items()):
            out.append(s)
    return out


def check_columns(config: TableConfig, columns: Sequence[str] | None) -> None:
    if columns is None:
        return
    known = set(config.schema.names) | set(META_COLUMNS)
    unknown = [c for c in columns if c not in known]
    if unknown:
        hint = did_you_mean(unknown, [*config.schema.names, *META_COLUMNS])
        raise InvalidInput(f"unknown column(s) {unknown}{hint}; the table has {config.schema.names} "
                           f"and meta columns {list(META_COLUMNS)}")


def read_slices(storage: Storage, config: TableConfig, slices: Sequence[FileSlice], wanted: list[str], *,
                meta: bool, base_only: bool = False, keep_deletes: bool = False,
                where: RowGroupFilter | None = None) -> pa.Table:
    """Merged rows of many slices, concurrently; with `meta`, plus file name and partition path.
    `where`: the filter the caller applies after (see `read_slice`)."""

    def one(fs: FileSlice) -> pa.Table:
        return merged_slice(storage, config, fs, wanted, meta=meta, base_only=base_only,
                            keep_deletes=keep_deletes, where=where)

    if slices:
        parts = list(slice_pool.map(one, slices)) if len(slices) > 1 else [one(slices[0])]
        return pa.concat_tables(parts)
    return no_slices(config, wanted, meta=meta, keep_deletes=keep_deletes)


def merged_slice(storage: Storage, config: TableConfig, fs: FileSlice, wanted: list[str], *, meta: bool,
                 base_only: bool = False, keep_deletes: bool = False,
                 where: RowGroupFilter | None = None) -> pa.Table:
    """One slice's merged rows (see `read_slices`; `where` as in `read_slice`)."""
    t = read_slice(storage, config, fs, wanted, base_only=base_only, keep_deletes=keep_deletes,
                   where=where)
    if meta:
        t = t.append_column(FILE_NAME, file_names(fs, t.column(COMMIT_TIME)))
        t = t.append_column(PARTITION_PATH, pa.array([fs.partition] * t.num_rows, pa.string()))
    return t


def no_slices(config: TableConfig, wanted: list[str], *, meta: bool, keep_deletes: bool = False) -> pa.Table:
    """What `read_slices` gives for no slices: no rows, in the columns it gives for some."""
    schema = file_schema(config)
    table = pa.schema([schema.field(c) for c in wanted]).empty_table()
    if keep_deletes:
        table = table.append_column(OP, pa.array([], pa.int8()))
    if meta:
        table = table.append_column(FILE_NAME, pa.array([], pa.string()))
        table = table.append_column(PARTITION_PATH, pa.array([], pa.string()))
    return table


def check_filter(config: TableConfig, filter: pc.Expression | None, wanted: list[str],
                 columns: Sequence[str] | None, *, meta: bool) -> None:
    """InvalidInput, before anything is read, for a filter naming a column the rows do not have (a meta
    column without `with_meta`, but the commit time, which a plain read filters on as its int64) or
    comparing a column with a value of another type."""
    if filter is None:
        return
    try:
        finish(no_slices(config, wanted, meta=meta), config, columns=columns, filter=filter, with_meta=meta)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        names = [*config.schema.names, *(META_COLUMNS if meta else ())]
        missing = re.search(r"FieldRef\.Name\((.*?)\)", str(exc))
        if missing is not None:
            name = missing[1]
            hint = " (a meta column: read with_meta=True, `--with-meta`)" if name in META_COLUMNS else \
                did_you_mean([name], names)
            raise InvalidInput(f"filter {filter} names no column {name!r}{hint}; the rows have "
                               f"{names}") from None
        typed = ", ".join(f"{f.name}: {f.type}" for f in config.schema)
        raise InvalidInput(f"filter {filter} does not apply to the table's columns ({typed}): "
                           f"{str(exc).splitlines()[0]}") from None


def filter_columns(expr: pc.Expression | None) -> list[str]:
    # pyarrow has no public accessor for an expression's field references; its text names them, and
    # merge_columns keeps only names that are real columns, so an extra word here reads nothing more.
    return re.findall(r"[A-Za-z_][A-Za-z0-9_]*", str(expr)) if expr is not None else []


def finish(table: pa.Table, config: TableConfig, *, columns: Sequence[str] | None,
           filter: pc.Expression | None, with_meta: bool) -> pa.Table:
    """Apply column-group defaults and shared ordering fields, meta columns, filter, projection."""
    if config.merge_mode == "partial_update":
        table = _fill_groups(table, config)
    if with_meta:
        table = _add_meta(table, config)
    if filter is not None:
        table = table.filter(filter)
    out = list(columns) if columns is not None else \
        ([*META_COLUMNS] if with_meta else []) + list(config.schema.names)
    return table.select(out)


def _fill_groups(table: pa.Table, config: TableConfig) -> pa.Table:
    names = table.column_names
    for shared in config.shared_ordering_fields():
        if shared in names:
            ords = [table.column(group_ordering_column(g.name)) for g in config.column_groups
                    if g.ordering_field == shared and group_ordering_column(g.name) in names]
            if ords:
                idx = names.index(shared)
                table = table.set_column(idx, shared, pc.max_element_wise(*ords, skip_nulls=True))
    for g in config.column_groups:
        hidden = group_ordering_column(g.name)
        if hidden not in names:
            continue
        absent = pc.is_null(table.column(hidden))
        for col in g.columns:
            if col in config.column_defaults and col in names:
                dflt = pa.scalar(config.column_defaults[col], config.schema.field(col).type)
                i = table.column_names.index(col)
                table = table.set_column(i, col, pc.if_else(absent, dflt, table.column(col)))
    return table


def _add_meta(table: pa.Table, config: TableConfig) -> pa.Table:
    if len(config.record_key) == 1:
        key = pc.cast(table.column(config.record_key[0]), pa.string())
    else:
        key = pc.binary_join_element_wise(
            *[pc.binary_join_element_wise(f"{k}:", pc.cast(table.column(k), pa.string()), "")
              for k in config.record_key], ",")
    commit = pc.cast(table.column(COMMIT_TIME), pa.string())
    table = table.set_column(table.column_names.index(COMMIT_TIME), COMMIT_TIME, commit)
    return table.append_column(RECORD_KEY, key)
