"""Input checking for writes: make user data fit the table, or say precisely why it does not.

Owns: column presence (record key, partition fields, ordering fields, non-nullable columns, whole
column groups; a nullable column the input lacks is written as null, so a writer that predates a
column added to the table keeps writing), null keys, type compatibility (only lossless widenings
are applied), and the meta columns a write adds (`_weir_op`, per-group ordering values). An upsert
whose input carries `_weir_op` is a change stream (CDC): each row says upsert or delete, and a
delete row needs only its key (its other columns may be null). Pure:
takes Arrow data and the config, returns Arrow data. Every failure raises before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import (
    OP,
    OP_DELETE,
    OP_UPSERT,
    TableConfig,
    case_twins,
    check_supported_type,
    did_you_mean,
    group_ordering_column,
)
from lakecore.errors import InvalidInput, MissingColumn, NullKey, SchemaMismatch, UnknownOperation
from lakecore.timeline import OVERWRITE_OPERATIONS

if TYPE_CHECKING:
    import pandas as pd

Operation = Literal["upsert", "insert", "bulk_insert", "delete", "insert_overwrite", "insert_overwrite_table"]
OPERATIONS: tuple[str, ...] = get_args(Operation)
# writes that replace file groups: the touched partitions' (insert_overwrite) or all (..._table)
OVERWRITES = OVERWRITE_OPERATIONS


class ArrowStream(Protocol):
    """Anything that exports an Arrow C stream (polars, DuckDB relations, pyarrow readers, ...)."""

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...


# what a write takes (`as_table` turns it into a pyarrow.Table; anything else raises InvalidInput)
WriteInput: TypeAlias = "pa.Table | pa.RecordBatch | pd.DataFrame | ArrowStream"


def check_operation(operation: object) -> Operation:
    """`operation` as an Operation, or UnknownOperation (callers check before any instant exists)."""
    if isinstance(operation, str) and operation in OPERATIONS:
        return operation  # type: ignore[return-value]
    raise UnknownOperation(f"unknown write operation {operation!r}; use one of {', '.join(OPERATIONS)}")


@dataclass(frozen=True)
class Conformed:
    rows: pa.Table                 # table columns in schema order (+ _weir_op, hidden ordering columns)
    groups: tuple[str, ...]        # column groups this write carries (partial-update tables)


def as_table(data: object) -> pa.Table:
    """The write input as a pyarrow.Table: a Table as it is, a RecordBatch or pandas DataFrame
    converted, anything exporting an Arrow stream read whole; InvalidInput for anything else."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "__arrow_c_stream__") or hasattr(data, "to_arrow"):
        return without_views(pa.table(data))
    try:
        import pandas as pd
        if isinstance(data, pd.DataFrame):
            return pa.Table.from_pandas(data, preserve_index=False)
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    raise InvalidInput(f"cannot write a {type(data).__name__}; pass a pyarrow.Table, RecordBatch or "
                       "pandas.DataFrame")


_VIEWS = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}


def without_views(table: pa.Table) -> pa.Table:
    """`table` with its string_view and binary_view columns (what Polars exports) as string and binary,
    the types a table stores: the same values, in the layout Parquet writes."""
    for i, f in enumerate(table.schema):
        if f.type in _VIEWS:
            table = table.set_column(i, f.with_type(_VIEWS[f.type]), table.column(i).cast(_VIEWS[f.type]))
    return table


def _widening_ok(src: pa.DataType, dst: pa.DataType) -> bool:
    families = (pa.types.is_integer, pa.types.is_floating, pa.types.is_timestamp, pa.types.is_date,
                pa.types.is_decimal)
    if any(f(src) and f(dst) for f in families):
        return True
    strings = (pa.types.is_string, pa.types.is_large_string)
    binaries = (pa.types.is_binary, pa.types.is_large_binary)
    return (any(f(src) for f in strings) and any(f(dst) for f in strings)) or \
        (any(f(src) for f in binaries) and any(f(dst) for f in binaries)) or \
        (pa.types.is_integer(src) and pa.types.is_floating(dst)) or \
        (pa.types.is_floating(src) and pa.types.is_decimal(dst))   # where exact (`_exactly`)


def _conform_column(name: str, col: pa.ChunkedArray, field: pa.Field,
                    upserts: pa.Array | None = None) -> pa.ChunkedArray:
    if pa.types.is_dictionary(col.type):
        col = col.cast(col.type.value_type)
    if pa.types.is_null(col.type):
        col = pa.chunked_array([pa.nulls(len(col), field.type)])
    if col.type != field.type:
        if not _widening_ok(col.type, field.type):
            raise SchemaMismatch(f"column {name!r} has type {col.type} but the table stores {field.type}; "
                                 f"cast it to {field.type} before writing")
        try:
            cast = col.cast(field.type, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaMismatch(f"column {name!r} cannot be converted from {col.type} to {field.type} "
                                 f"without loss ({exc}); fix the values or the type") from None
        if pa.types.is_floating(col.type):
            (_in_range if pa.types.is_floating(field.type) else _exactly)(name, col, cast)
        col = cast
    nulls = col.null_count if upserts is None else _nulls_among(col, upserts)
    if not field.nullable and nulls:
        raise SchemaMismatch(f"column {name!r} is declared non-nullable but has {nulls} nulls; "
                             "fill them before writing")
    if not field.nullable and col.null_count:  # delete rows of a change stream: never read, only stored
        col = pc.fill_null(col, _zero(field.type))
    return col


def first_changed(given: pa.ChunkedArray, cast: pa.ChunkedArray) -> int | None:
    """The first row whose value `cast` (of `given`) does not hold exactly, read back into `given`'s
    type (None: every one is the same). Raises what pyarrow does when there is no cast back.

    Into a decimal: text parsed by a safe cast is exact already (a digit it would drop fails the cast),
    and a float is read back through the decimal's digits, which the float parser rounds correctly:
    Arrow's decimal-to-float cast is not correctly rounded (19.99 reads back as 19.990000000000002), so
    comparing with it refused exact values."""
    decimal = pa.types.is_decimal(cast.type)
    if decimal and (pa.types.is_string(given.type) or pa.types.is_large_string(given.type)):
        return None
    via = cast.cast(pa.string()) if decimal and pa.types.is_floating(given.type) else cast
    changed = pc.fill_null(pc.not_equal(via.cast(given.type), given), False)
    return pc.index(changed, True).as_py() if pc.any(changed).as_py() else None


def _exactly(name: str, given: pa.ChunkedArray, cast: pa.ChunkedArray) -> None:
    """A float column written into a decimal one (JSON numbers as Spark and pyarrow read them): each value
    must be the decimal's exactly (1.25 into decimal(10,2); 1.999 would be stored as 2.00: refused)."""
    row = first_changed(given, cast)
    if row is not None:
        raise SchemaMismatch(f"column {name!r}: {given[row].as_py()!r} does not fit {cast.type} exactly (it "
                             f"would be stored as {cast[row].as_py()}); round it in the input, or give the "
                             "column a larger scale")


def first_out_of_range(given: pa.ChunkedArray, cast: pa.ChunkedArray) -> int | None:
    """The first row whose finite float `cast` (into a narrower float) made infinite, or None."""
    over = pc.fill_null(pc.and_(pc.is_finite(given), pc.invert(pc.is_finite(cast))), False)
    return pc.index(over, True).as_py() if pc.any(over).as_py() else None


def _in_range(name: str, given: pa.ChunkedArray, cast: pa.ChunkedArray) -> None:
    """Floats into a narrower float column (double into float32) round to the nearest value it holds, as
    Spark's and SQL's casts do (0.1 is stored as float32's 0.1); a finite value beyond its range, which
    would be stored as an infinity, is refused."""
    row = first_out_of_range(given, cast)
    if row is not None:
        raise SchemaMismatch(f"column {name!r}: {given[row].as_py()!r} is beyond the range of {cast.type} "
                             f"(it would be stored as {cast[row].as_py()}); fix the value, or give the "
                             "column a wider type")


def _zero(type_: pa.DataType) -> pa.Scalar:
    """A value of `type_` for a column a delete row leaves empty (0, "", false, the epoch)."""
    try:
        return pa.array([0]).cast(type_)[0]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([""]).cast(type_)[0]


def _nulls_among(col: pa.ChunkedArray, rows: pa.Array) -> int:
    """How many of the `rows` (a boolean mask) have a null in `col`."""
    return int(pc.sum(pc.and_(pc.is_null(col.combine_chunks()), rows)).as_py() or 0)


def _split_changes(table: pa.Table, operation: Operation) -> tuple[pa.Table, pa.Array | None]:
    """A change stream's input (upserts and deletes in one write, e.g. CDC) carries its own `_weir_op`
    per row: take it off the data. Returns (data, that op column or None)."""
    if OP not in table.column_names:
        return table, None
    if operation != "upsert":
        raise InvalidInput(f"a per-row {OP} column (upserts and deletes in one write) comes with operation "
                           f"'upsert', not {operation!r}; drop the column or write with upsert")
    ops = table.column(OP).combine_chunks()
    if not pa.types.is_integer(ops.type) or ops.null_count or \
            not pc.all(pc.is_in(ops, pa.array([OP_UPSERT, OP_DELETE], ops.type)), min_count=0).as_py():
        raise InvalidInput(f"column {OP} holds each row's change: {OP_UPSERT} (upsert) or {OP_DELETE} "
                           "(delete), never null; fix the input")
    return table.drop_columns([OP]), ops.cast(pa.int8())


def _require(data: pa.Table, columns: tuple[str, ...], role: str) -> None:
    missing = [c for c in columns if c not in data.column_names]
    if missing:
        others = [c for c in data.column_names if c not in columns]
        raise MissingColumn(f"input lacks {role} column(s) {missing}{did_you_mean(missing, others)}; input "
                            f"has {data.column_names}: every row needs its {role} value, add the column")


def _no_nulls(data: pa.Table, columns: tuple[str, ...], role: str) -> None:
    for c in columns:
        n = data.column(c).null_count
        if n:
            raise NullKey(f"{n} row(s) have a null {role} {c!r}; every row needs one: drop or fill them")


def conform(data: Any, config: TableConfig, operation: Operation) -> Conformed:
    """Check and convert one write's input. Deletes need only the record key (and partition fields)."""
    check_operation(operation)
    table, changes = _split_changes(as_table(data), operation)
    upserts = None if changes is None else pc.equal(changes, OP_UPSERT)
    schema = config.schema
    unknown = [c for c in table.column_names if c not in schema.names]
    if unknown:
        lacking = [n for n in schema.names if n not in table.column_names]
        remedy = "drop them, or add them to the table: a LakeTable's spec.schema, `weir table upsert " \
            "--evolve-schema` (and insert, overwrite), in Python Table.add_columns or " \
            "FileOptions(evolve_schema=True)"
        if operation == "delete":   # a delete names keys: a column it does not know is a mistake
            fields = list(config.partition_fields)
            parts = f" and the partition fields {fields}" if fields else ""
            remedy = f"a delete takes the record key {list(config.record_key)}{parts} (and the ordering " \
                "field, for event-time deletes); rename or drop the others"
        raise SchemaMismatch(f"input columns {unknown} are not in the table schema {schema.names}"
                             f"{did_you_mean(unknown, lacking)}; {remedy}")
    if len(set(table.column_names)) != table.num_columns:
        raise SchemaMismatch(f"input has duplicate column names {table.column_names}")
    for f in table.schema:
        if not pa.types.is_dictionary(f.type) and not pa.types.is_null(f.type):
            check_supported_type(f.name, f.type)
    fixed = (*config.record_key, *config.partition_fields)
    _require(table, config.record_key, "record key")
    _require(table, config.partition_fields, "partition field")
    if operation == "delete":
        wanted = [c for c in schema.names if c in table.column_names and
                  (c in fixed or c in config.ordering_fields)]
        groups: tuple[str, ...] = tuple(g.name for g in config.column_groups)
    else:
        groups = _carried_groups(table, config)
        wanted = [c for c in schema.names if c in table.column_names]
        if config.merge_mode != "partial_update":
            _require(table, config.ordering_fields, "ordering field")
            _require(table, tuple(f.name for f in schema if not f.nullable), "non-nullable table")
            wanted = list(schema.names)  # nullable columns the input lacks are written as null
    cols = {c: _conform_column(c, table.column(c), schema.field(c), upserts) if c in table.column_names
            else pa.chunked_array([pa.nulls(table.num_rows, schema.field(c).type)]) for c in wanted}
    out = pa.table(cols) if cols else pa.table({})
    _no_nulls(out, fixed, "record key" if len(fixed) == len(config.record_key) else "key/partition value")
    if operation != "delete":
        for f in _required_orderings(config, groups):
            n = out.column(f).null_count if upserts is None else _nulls_among(out.column(f), upserts)
            if n:
                raise InvalidInput(f"{n} row(s) have a null ordering field {f!r}; every upsert needs an "
                                   "ordering value: fill them (e.g. with the event time)")
    op = OP_DELETE if operation == "delete" else OP_UPSERT
    out = out.append_column(OP, changes if changes is not None else
                            pa.array(np.full(out.num_rows, op, dtype=np.int8)))
    if config.merge_mode == "partial_update":
        for g in config.column_groups:
            hidden = group_ordering_column(g.name)
            if g.name in groups and g.ordering_field in out.column_names:
                out = out.append_column(hidden, out.column(g.ordering_field))
    return Conformed(out, groups)


def evolved_schema(data: pa.Table, config: TableConfig) -> pa.Schema | None:
    """The table schema plus the input's new columns (as nullable), or None when there are none.

    Additive evolution only: new columns are appended, existing ones keep their types (the input is
    still conformed to them). Partial-update tables would need each new column placed in a column
    group, which is a table change, so they refuse evolution through writes.
    """
    new = [f for f in data.schema if f.name not in config.schema.names]
    if not new:
        return None
    if config.merge_mode == "partial_update":
        raise SchemaMismatch(f"input columns {[f.name for f in new]} are not in the table; a partial-update "
                             "table cannot gain columns through a write (each must join a column group): add "
                             "them first with Table.add_columns(fields, groups={column: group}), then write")
    if (why := case_twins(config.schema.names, [f.name for f in new])) is not None:
        raise SchemaMismatch(f"input {why}")
    fields = []
    for f in new:
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if pa.types.is_null(t):
            raise SchemaMismatch(f"new column {f.name!r} is all nulls, so its type is unknown; cast it to "
                                 "the type it should have")
        check_supported_type(f.name, t)
        fields.append(pa.field(f.name, t, nullable=True))
    return pa.schema([*config.schema, *fields])


def _carried_groups(table: pa.Table, config: TableConfig) -> tuple[str, ...]:
    if config.merge_mode != "partial_update":
        return ()
    shared = set(config.shared_ordering_fields())
    carried = []
    for g in config.column_groups:
        own = [c for c in g.columns if c not in shared]
        present = [c for c in own if c in table.column_names]
        if not present:
            continue
        missing = [c for c in dict.fromkeys((*g.columns, g.ordering_field)) if c not in table.column_names]
        if missing:
            raise MissingColumn(f"input carries column group {g.name!r} partly: it lacks {missing}; "
                                f"a write updates whole groups ({list(g.columns)})")
        carried.append(g.name)
    if not carried:
        raise MissingColumn("input carries no column group; include all columns of at least one of "
                            f"{[list(g.columns) for g in config.column_groups]}")
    return tuple(carried)


def _required_orderings(config: TableConfig, groups: tuple[str, ...]) -> tuple[str, ...]:
    if config.merge_mode == "partial_update":
        return tuple(dict.fromkeys(config.group(g).ordering_field for g in groups))
    return config.ordering_fields

