"""What files of a table hold and how their records merge, derived from the table config. Pure.

File schema = the table schema + `_weir_commit_time` (int64 instant time of the record's last write)
+ one hidden ordering column per column group (partial-update tables). Log files also hold `_weir_op`;
base files hold `_weir_op` (1 = a tombstone) and, with several column groups, `_weir_op__<group>` (1 =
the group of this live key is deleted; absent in files written before it existed: no group deleted).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import (
    COMMIT_TIME,
    META_FIELD_ID_BASE,
    OP,
    TableConfig,
    group_ordering_column,
    with_field_id,
)
from lakecore.merge import GroupSpec, MergeSpec
from lakecore.timeline import format_ms, to_epoch_ms

OP_DELETE = 1


def meta_field_ids(config: TableConfig) -> dict[str, int]:
    """The reserved Parquet field ids of the meta columns a data file may store (`config.FIELD_ID`;
    column groups never change, so each group's columns keep theirs)."""
    out = {COMMIT_TIME: META_FIELD_ID_BASE, OP: META_FIELD_ID_BASE + 1}
    group_ops = merge_spec(config).group_op_columns if config.merge_mode == "partial_update" else ()
    for i, g in enumerate(config.column_groups):
        out[group_ordering_column(g.name)] = META_FIELD_ID_BASE + 2 + 2 * i
    for i, name in enumerate(group_ops):
        out[name] = META_FIELD_ID_BASE + 3 + 2 * i
    return out


def _meta(config: TableConfig, name: str, t: pa.DataType) -> pa.Field:
    return with_field_id(pa.field(name, t), meta_field_ids(config)[name])


def hidden_columns(config: TableConfig) -> list[pa.Field]:
    fields = [_meta(config, COMMIT_TIME, pa.int64())]
    if config.merge_mode == "partial_update":
        for g in config.column_groups:
            fields.append(_meta(config, group_ordering_column(g.name),
                                config.schema.field(g.ordering_field).type))
    return fields


def file_schema(config: TableConfig) -> pa.Schema:
    return pa.schema([*config.schema, *hidden_columns(config)])


def op_columns(config: TableConfig) -> list[str]:
    """The op columns a data file may hold (read them with the data: the merge needs them)."""
    return [OP, *merge_spec(config).group_op_columns]


def base_schema(config: TableConfig) -> pa.Schema:
    """What a base file stores: the file schema and the op columns."""
    return pa.schema([*file_schema(config), *(_meta(config, c, pa.int8()) for c in op_columns(config))])


def as_base_file(state: pa.Table, config: TableConfig) -> pa.Table:
    """A base state (see `merge_to_base`) in the base schema; op columns it lacks are null."""
    schema = base_schema(config)
    columns = [state.column(f.name).cast(f.type) if f.name in state.column_names
               else pa.nulls(state.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def merge_spec(config: TableConfig) -> MergeSpec:
    if config.merge_mode == "partial_update":
        groups = tuple(GroupSpec(g.name, g.columns, group_ordering_column(g.name))
                       for g in config.column_groups)
    else:
        # a table of keys only still needs one group to decide liveness: the commit time carries it
        groups = (GroupSpec("all", config.data_columns or (COMMIT_TIME,), config.ordering_field),)
    return MergeSpec(key=config.record_key, groups=groups)


def purge_tombstones(state: pa.Table, config: TableConfig, instant_time: str) -> pa.Table:
    """Drop the tombstones (delete rows of a base state) whose delete committed more than the table's
    `tombstone_retention_hours` before `instant_time` (the instant writing the base). After that, an
    event older than the delete arriving late brings the key back: the retention is the promise of
    how late events may arrive. Incremental reads over a range whose deletes were purged no longer
    show them. No-op when the table keeps tombstones (the default)."""
    hours = config.tombstone_retention_hours
    if hours is None or OP not in state.column_names or state.num_rows == 0:
        return state
    cutoff = int(format_ms(max(to_epoch_ms(instant_time) - round(hours * 3_600_000), 0)))
    expired = pc.and_(pc.equal(state.column(OP), OP_DELETE), pc.less(state.column(COMMIT_TIME), cutoff))
    if not pc.any(expired).as_py():
        return state
    return state.filter(pc.invert(expired))
