"""What files of a table hold and how their records merge, derived from the table config. Pure.

File schema = the table schema + `_weir_commit_time` (int64 instant time of the record's last write)
+ one hidden ordering column per column group (partial-update tables). Log files also hold `_weir_op`.
"""

from __future__ import annotations

import pyarrow as pa

from lakecore.config import COMMIT_TIME, TableConfig, group_ordering_column
from lakecore.merge import GroupSpec, MergeSpec


def hidden_columns(config: TableConfig) -> list[pa.Field]:
    fields = [pa.field(COMMIT_TIME, pa.int64())]
    if config.merge_mode == "partial_update":
        for g in config.column_groups:
            fields.append(pa.field(group_ordering_column(g.name), config.schema.field(g.ordering_field).type))
    return fields


def file_schema(config: TableConfig) -> pa.Schema:
    return pa.schema([*config.schema, *hidden_columns(config)])


def merge_spec(config: TableConfig) -> MergeSpec:
    if config.merge_mode == "partial_update":
        groups = tuple(GroupSpec(g.name, g.columns, group_ordering_column(g.name))
                       for g in config.column_groups)
    else:
        # a table of keys only still needs one group to decide liveness: the commit time carries it
        groups = (GroupSpec("all", config.data_columns or (COMMIT_TIME,), config.ordering_field),)
    return MergeSpec(key=config.record_key, groups=groups)
