"""The task side of a write: one file group's rows in, one data file and its write stat out.

Runs anywhere (driver, Spark executor, another process): `WriteContext` carries everything it needs
and pickles. Steps: precombine the rows (one per key), create the marker, then write a log file
(merge-on-read), a new base file merged with the current one (copy-on-write), or a fresh base file
(bulk insert into an empty file group; an overwrite, whose base replaces the group's slice, and is
empty for a group of its scope without input rows: `empty_group`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import COMMIT_TIME, OP, OP_DELETE, TableConfig
from lakecore.formats import EncodingChoice, read_files, write_data_file
from lakecore.layout import FileSlice, base_file_name, log_file_name
from lakecore.merge import merge_to_base, precombine
from lakecore.read.spec import (
    as_base_file,
    base_schema,
    file_schema,
    merge_spec,
    op_columns,
    purge_tombstones,
)
from lakecore.storage import Storage
from lakecore.timeline import WriteStat
from lakecore.write.conform import OVERWRITES, Operation
from lakecore.write.markers import DirectMarkers, IOType, Marker, MarkerWriter
from lakecore.write.routing import FileGroupRows, partitions, route


@dataclass(frozen=True)
class WriteContext:
    storage: Storage
    config: TableConfig
    instant_time: str
    operation: Operation
    slices: Mapping[tuple[str, str], FileSlice] = field(default_factory=dict)  # view at write start
    write_token: str = "0-0-0"
    markers: MarkerWriter = field(default_factory=DirectMarkers)
    max_rows_per_file: int | None = None  # log files roll over after this many rows
    encodings: EncodingChoice = field(default_factory=EncodingChoice, compare=False)

    def mark(self, path: str, io: IOType, partition: str, file_id: str) -> None:
        self.markers.create(self.storage, Marker(self.instant_time, path, io), partition, file_id)


def _with_commit_time(rows: pa.Table, instant_time: str) -> pa.Table:
    col = pa.array(np.full(rows.num_rows, int(instant_time), dtype=np.int64))
    if COMMIT_TIME in rows.column_names:
        return rows.set_column(rows.column_names.index(COMMIT_TIME), COMMIT_TIME, col)
    return rows.append_column(COMMIT_TIME, col)


def combine_and_route(rows: pa.Table, config: TableConfig, operation: Operation) -> list[FileGroupRows]:
    """Route a write's conformed rows to file groups. For a merge-on-read write that appends log
    files, first precombine each partition's rows once (keys are unique per partition): one
    vectorized pass over the batch instead of one per file group, which for small frequent
    commits into many buckets was most of the tasks' work. The commit time is not known yet; all
    rows of a write share it, so a placeholder decides the same, and the task sets the real one."""
    if config.table_type != "merge_on_read" or operation in ("bulk_insert", *OVERWRITES) \
            or rows.num_rows == 0:
        return route(rows, config)
    spec, schema = merge_spec(config), file_schema(config)
    groups: list[FileGroupRows] = []
    for part in partitions(rows, config):
        groups += route(precombine(_with_commit_time(part, "0"), spec, schema), config, combined=True)
    return groups


def _log_schema(ctx: WriteContext, rows: pa.Table) -> pa.Schema:
    full = file_schema(ctx.config)
    present = [f for f in full if f.name in rows.column_names]
    return pa.schema([*present, pa.field(OP, pa.int8())])


def write_file_group(ctx: WriteContext, group: FileGroupRows) -> list[WriteStat]:
    """Write one file group's rows; returns the stats of the file(s) written."""
    config = ctx.config
    rows = _with_commit_time(group.rows, ctx.instant_time)
    current = ctx.slices.get((group.partition, group.file_id))
    if ctx.operation in OVERWRITES:  # the new slice holds this write's rows only
        return [_write_base(ctx, group, rows, None, merge_with_current=False)]
    if config.table_type == "copy_on_write":
        return [_write_base(ctx, group, rows, current, merge_with_current=True)]
    if ctx.operation == "bulk_insert" and (current is None or not current.files):
        return [_write_base(ctx, group, rows, None, merge_with_current=False)]
    return _write_logs(ctx, group, rows)


def empty_group(config: TableConfig, partition: str, file_id: str) -> FileGroupRows:
    """No rows for a file group: what an overwrite writes where its scope had a group the input
    does not reach (an empty base file supersedes the group's old slice)."""
    schema = pa.schema([*file_schema(config), pa.field(OP, pa.int8())])
    return FileGroupRows(partition, file_id, schema.empty_table(), combined=True)


def _write_logs(ctx: WriteContext, group: FileGroupRows, rows: pa.Table) -> list[WriteStat]:
    schema = _log_schema(ctx, rows)
    # precombine over the full schema (so every group still decides), then keep only what was written
    if not group.combined:
        rows = precombine(rows, merge_spec(ctx.config), file_schema(ctx.config))
    rows = rows.select(schema.names).cast(schema)
    step = ctx.max_rows_per_file or max(rows.num_rows, 1)
    stats = []
    for version, start in enumerate(range(0, max(rows.num_rows, 1), step), start=1):
        chunk = rows.slice(start, step)
        name = log_file_name(group.file_id, ctx.instant_time, ctx.write_token, version)
        path = f"{group.partition}/{name}" if group.partition else name
        ctx.mark(path, "append", group.partition, group.file_id)
        size, written = write_data_file(ctx.storage, path, chunk, compression=ctx.config.compression,
                                        encodings=ctx.encodings, ids=base_schema(ctx.config))
        deletes = int(pc.sum(chunk.column(OP)).as_py() or 0)
        stats.append(WriteStat(group.partition, group.file_id, name, "log", chunk.num_rows, deletes, size,
                               stats=written.to_json()))
    return stats


def _write_base(ctx: WriteContext, group: FileGroupRows, rows: pa.Table, current: FileSlice | None,
                *, merge_with_current: bool) -> WriteStat:
    """A new base file: the file group's whole state (tombstones included, see merge_to_base)."""
    config = ctx.config
    schema = file_schema(config)
    spec = merge_spec(config)
    has_deletes = bool(pc.any(pc.equal(rows.column(OP), OP_DELETE)).as_py())
    if merge_with_current and current is not None and current.base is not None:
        existing = read_files(ctx.storage, [current.base.path], [*schema.names, *op_columns(config)])[0]
        state = merge_to_base([existing, rows], spec, schema, first_unique=True)
    elif has_deletes:
        state = merge_to_base([rows], spec, schema)
    else:  # all upserts: pre-combining alone gives one row per key
        state = precombine(rows, spec, schema)
    state = as_base_file(purge_tombstones(state, config, ctx.instant_time), config)
    name = base_file_name(group.file_id, ctx.write_token, ctx.instant_time)
    path = f"{group.partition}/{name}" if group.partition else name
    io: IOType = "merge" if current is not None and current.files else "create"
    ctx.mark(path, io, group.partition, group.file_id)
    size, written = write_data_file(ctx.storage, path, state, compression=config.compression,
                                    encodings=ctx.encodings, ids=base_schema(config))
    live = state.num_rows - int(pc.sum(state.column(OP)).as_py() or 0)
    deletes = int(pc.sum(pc.equal(rows.column(OP), OP_DELETE)).as_py() or 0)
    return WriteStat(group.partition, group.file_id, name, "base", live, deletes, size,
                     base_instant=current.base_instant if current is not None else None,
                     stats=written.to_json())
