"""The task side of a write: one file group's rows in, one data file and its write stat out.

Runs anywhere (driver, Spark executor, another process): `WriteContext` carries everything it needs
and pickles. Steps: precombine the rows (one per key), create the marker, then write a log file
(merge-on-read), a new base file merged with the current one (copy-on-write), or a fresh base file
(bulk insert into an empty file group; an overwrite, whose base replaces the group's slice, and is
empty for a group of its scope without input rows: `empty_group`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property, partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import COMMIT_TIME, OP, OP_DELETE, TableConfig
from lakecore.formats import ROW_GROUP_ROWS, EncodingChoice, RowSource, read_files, write_data_file
from lakecore.layout import FileSlice, base_file_name, log_file_name
from lakecore.merge import merge_to_base, precombine, unique_keys
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
from lakecore.write.routing import FileGroupRows, partitions, route, take_ascending
from lakecore.write.syncs import BackgroundSyncs


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
    # set by a writer that runs its tasks on threads: data files are synced there, off the task
    # threads, and the writer waits for them before its commit (None: each file synced as written)
    syncs: BackgroundSyncs | None = field(default=None, compare=False)

    def sync(self, path: str) -> None:
        """Make a data file this task wrote durable (now, or on `syncs` before the commit)."""
        if self.syncs is None:
            self.storage.sync(path)
        else:
            self.syncs.submit(self.storage, path)

    @property
    def early_sync(self) -> Callable[[str], None] | None:
        """With background syncs, what starts syncing a data file's row groups written so far."""
        return None if self.syncs is None else self.sync

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
        return route(rows, config, upserts_only=_upserts_only(rows, config))
    spec, schema = merge_spec(config), file_schema(config)
    groups: list[FileGroupRows] = []
    for part in partitions(rows, config):
        groups += route(precombine(_with_commit_time(part, "0"), spec, schema), config, combined=True)
    return groups


def _upserts_only(rows: pa.Table, config: TableConfig) -> bool:
    """Whether a write's rows hold keys, no delete and no op of a column group's own: a new base file
    of a group of them needs no merge where its keys are unique (`_gathered`). Decided once per
    write, for all of its groups."""
    spec = merge_spec(config)
    if any(k not in rows.column_names for k in spec.key):
        return False
    if OP in rows.column_names and (pc.max(rows.column(OP)).as_py() or 0) >= OP_DELETE:
        return False  # (ops are 0 or 1: conformed)
    return not any(c in rows.column_names and rows.column(c).null_count < rows.num_rows
                   for c in spec.group_op_columns)


def _log_schema(ctx: WriteContext, rows: pa.Table) -> pa.Schema:
    full = file_schema(ctx.config)
    present = [f for f in full if f.name in rows.column_names]
    return pa.schema([*present, pa.field(OP, pa.int8())])


def write_file_group(ctx: WriteContext, group: FileGroupRows) -> list[WriteStat]:
    """Write one file group's rows; returns the stats of the file(s) written: a new base file of
    the group's rows alone (an overwrite, whose slice holds this write's rows only; a bulk insert
    into a group without files), merged with the current slice's (copy-on-write), else a log file."""
    current = ctx.slices.get((group.partition, group.file_id))
    if ctx.operation in OVERWRITES:
        merged_with = None
    elif ctx.config.table_type == "copy_on_write":
        merged_with = current
    elif ctx.operation == "bulk_insert" and (current is None or not current.files):
        merged_with = None
    else:
        return _write_logs(ctx, group, _with_commit_time(group.rows, ctx.instant_time))
    alone = merged_with is None or merged_with.base is None
    if alone and (gathered := _gathered(ctx, group)) is not None:
        return [_put_base(ctx, group, gathered, merged_with, live=gathered.num_rows, deletes=0)]
    return [_write_base(ctx, group, _with_commit_time(group.rows, ctx.instant_time), merged_with)]


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
                                        encodings=ctx.encodings, ids=base_schema(ctx.config), sync=ctx.sync,
                                        early_sync=ctx.early_sync)
        deletes = int(pc.sum(chunk.column(OP)).as_py() or 0)
        stats.append(WriteStat(group.partition, group.file_id, name, "log", chunk.num_rows, deletes, size,
                               stats=written.to_json()))
    return stats


def _write_base(ctx: WriteContext, group: FileGroupRows, rows: pa.Table,
                current: FileSlice | None) -> WriteStat:
    """A new base file: the file group's whole state (tombstones included, see merge_to_base), merged
    with `current`'s base file if it has one (None: of `rows` alone)."""
    config = ctx.config
    schema = file_schema(config)
    spec = merge_spec(config)
    has_deletes = bool(pc.any(pc.equal(rows.column(OP), OP_DELETE)).as_py())
    if current is not None and current.base is not None:
        existing = read_files(ctx.storage, [current.base.path], [*schema.names, *op_columns(config)])[0]
        state = merge_to_base([existing, rows], spec, schema, first_unique=True)
    elif has_deletes:
        state = merge_to_base([rows], spec, schema)
    else:  # all upserts: pre-combining alone gives one row per key
        state = precombine(rows, spec, schema)
    state = as_base_file(purge_tombstones(state, config, ctx.instant_time), config)
    live = state.num_rows - int(pc.sum(state.column(OP)).as_py() or 0)
    deletes = int(pc.sum(pc.equal(rows.column(OP), OP_DELETE)).as_py() or 0)
    return _put_base(ctx, group, state, current, live=live, deletes=deletes)


def _put_base(ctx: WriteContext, group: FileGroupRows, state: RowSource, current: FileSlice | None, *,
              live: int, deletes: int) -> WriteStat:
    """Write `state` as the group's new base file (marker first); its write stat."""
    config = ctx.config
    name = base_file_name(group.file_id, ctx.write_token, ctx.instant_time)
    path = f"{group.partition}/{name}" if group.partition else name
    io: IOType = "merge" if current is not None and current.files else "create"
    ctx.mark(path, io, group.partition, group.file_id)
    size, written = write_data_file(ctx.storage, path, state, compression=config.compression,
                                    encodings=ctx.encodings, ids=base_schema(config), sync=ctx.sync,
                                    early_sync=ctx.early_sync)
    return WriteStat(group.partition, group.file_id, name, "base", live, deletes, size,
                     base_instant=current.base_instant if current is not None else None,
                     stats=written.to_json())


@dataclass(frozen=True)
class _Gathered:
    """A file group's rows for its new base file as a `formats.RowSource`: each row group's rows are
    gathered from the write's input when the Parquet writer asks for them and made base rows then
    (`prepare`), so the group's rows are never held whole. A thread writing a 4M-row group holds one
    row group's rows at a time, and each reuses the memory the one before it freed, where gathering
    the whole group first had the kernel hand it fresh zeroed pages for every row (docs/benchmarks.md,
    fourteenth pass)."""

    source: pa.Table
    positions: np.ndarray
    prepare: Callable[[pa.Table], pa.Table]

    @cached_property
    def schema(self) -> pa.Schema:
        return self.slice(0, 0).schema

    @property
    def num_rows(self) -> int:
        return len(self.positions)

    def slice(self, offset: int = 0, length: int | None = None) -> pa.Table:
        stop = len(self.positions) if length is None else offset + length
        return self.prepare(take_ascending(self.source, self.positions[offset:stop]))


def _gathered(ctx: WriteContext, group: FileGroupRows) -> _Gathered | None:
    """The group's rows gathered a row group at a time for a new base file of its rows alone, where
    that writes the file a whole gather would: rows routed from a larger input (else there is
    nothing to gather), more than one row group of them, unique keys, and a write of upserts only
    (`FileGroupRows.upserts_only`). Otherwise None: the rows are gathered and merged whole
    (`_write_base`), which also says what is wrong with them (a null key)."""
    if not group.upserts_only:
        return None
    positions = group.row_positions()
    if positions is None or len(positions) <= ROW_GROUP_ROWS:
        return None
    keys = take_ascending(group.source.select(list(merge_spec(ctx.config).key)), positions)
    if not unique_keys(keys.columns):
        return None
    return _Gathered(group.source, positions, partial(_base_rows, ctx))


def _base_rows(ctx: WriteContext, rows: pa.Table) -> pa.Table:
    """Rows of a group checked to have unique keys and no deletes (`_gathered`), as its base file
    stores them: what `_write_base` makes of them, without the check."""
    state = precombine(_with_commit_time(rows, ctx.instant_time), merge_spec(ctx.config),
                       file_schema(ctx.config), keys_unique=True)
    return as_base_file(state, ctx.config)
