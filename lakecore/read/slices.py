"""Reading one file slice: its base file and log files merged into one row per live record key.

Owns column projection for merging (a query for a few columns still reads the key, the ordering
values and the op marker that decide which version wins) and the per-row `_weir_file_name`. Files
written before the table gained a column read it as null, on every path (merged or base only).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import COMMIT_TIME, OP, TableConfig
from lakecore.formats import RowGroupFilter, read_file, read_files
from lakecore.layout import FileSlice
from lakecore.merge import GroupSpec, MergeSpec, conform, merge, merge_to_base, unique_keys
from lakecore.read.spec import file_schema, merge_spec, op_columns
from lakecore.storage import Storage
from lakecore.timeline import WriteStat


def merge_columns(config: TableConfig, columns: Sequence[str] | None, *,
                  commit_time: bool = True) -> list[str]:
    """File columns to read so that `columns` can be merged correctly (None: all of them): the key,
    every group's ordering column, one column of each commit-time group (its presence is what says a
    batch carries the group) and, unless `commit_time` is False, the commit time (the merge itself
    needs it only where it is a group's column: in a table of keys only)."""
    schema = file_schema(config)
    if columns is None:
        return schema.names
    need = set(columns) | set(config.record_key) | ({COMMIT_TIME} if commit_time else set())
    for g in merge_spec(config).groups:
        need.add(g.ordering if g.ordering else g.columns[0])
    return [n for n in schema.names if n in need]


def projected_spec(spec: MergeSpec, names: Sequence[str]) -> MergeSpec:
    """The spec restricted to `names`. A group none of whose columns is present keeps its ordering
    column (so it still decides liveness); a group absent altogether is dropped."""
    keep = set(names)
    groups = []
    for g in spec.groups:
        cols = tuple(c for c in g.columns if c in keep)
        if not cols and g.ordering in keep:
            cols = (g.ordering,)
        if cols:
            groups.append(GroupSpec(g.name, cols, g.ordering))
    return MergeSpec(key=spec.key, groups=tuple(groups))


def read_slice(storage: Storage, config: TableConfig, fs: FileSlice, columns: list[str], *,
               keep_deletes: bool = False, base_only: bool = False,
               where: RowGroupFilter | None = None) -> pa.Table:
    """Merged rows of a slice with exactly `columns` (file-schema names). With `keep_deletes`, one row
    per key including deleted keys (as tombstone rows), plus `_weir_op`. `where`: a filter the caller
    applies to the result; a slice that is one base file then reads only the row groups that may
    match (its rows need no merge, so no row group can hold a newer version of another's key)."""
    files = slice_files(fs, base_only=base_only)
    if where is not None and not keep_deletes and len(files) == 1 and fs.base is not None:
        table = read_file(storage, files[0].path, [*columns, *op_columns(config)], where=where)
        return merge_slice(config, fs, [table], slice_schema(config, columns))
    tables = read_slice_files(storage, config, fs, columns, base_only=base_only)
    return merge_slice(config, fs, tables, slice_schema(config, columns), keep_deletes=keep_deletes)


def read_slices_together(storage: Storage, config: TableConfig, slices: Sequence[FileSlice],
                         columns: list[str]) -> pa.Table:
    """`read_slice` of several slices of one partition, all with a base file or all logs only: their
    files read together (`read_together`) and merged in one call (a merge's fixed cost is most of the
    work of a small slice) where they may be; else each slice merged alone, from the same tables.
    Either way the rows of `read_slice` of each, in `columns`."""
    if len({fs.base is None for fs in slices}) > 1:
        raise ValueError("slices with a base file and slices of logs only are merged apart")
    _, tables, as_one = read_together(storage, config, slices, columns)
    schema = slice_schema(config, columns)
    if as_one:
        return merge_slice(config, slices[0], stacked(tables), schema)
    return pa.concat_tables([merge_slice(config, fs, ts, schema)
                             for fs, ts in zip(slices, tables, strict=True)])


def read_together(storage: Storage, config: TableConfig, slices: Sequence[FileSlice], columns: Sequence[str]
                  ) -> tuple[list[list[WriteStat]], list[list[pa.Table]], bool]:
    """The files of several slices of one partition (`slice_files` of each) and their tables with
    `columns` and the op columns, all read at once, and whether the slices may be merged as one
    (`stacked`): their files have the same columns and, where any slice needs a merge (logs), no key
    is in two of them (`disjoint`; base files alone are not merged, so need no check)."""
    files = [slice_files(fs) for fs in slices]
    tables = group_tables(read_files(storage, [f.path for fl in files for f in fl],
                                     [*columns, *op_columns(config)], small=True), files)
    merged = any(fs.base is None or len(fs.files) > 1 for fs in slices)
    return files, tables, same_columns(tables) and (not merged or disjoint(tables, config))


def group_tables(flat: Sequence[pa.Table], files: Sequence[Sequence[WriteStat]]) -> list[list[pa.Table]]:
    """The tables of files read in one flat list, grouped back into their slices' files."""
    out: list[list[pa.Table]] = []
    at = 0
    for fl in files:
        out.append(list(flat[at:at + len(fl)]))
        at += len(fl)
    return out


def same_columns(tables: Sequence[Sequence[pa.Table]]) -> bool:
    first = tables[0][0].schema
    return all(t.schema.equals(first) for ts in tables for t in ts)


def stacked(tables: Sequence[Sequence[pa.Table]]) -> list[pa.Table]:
    """The merge's batches of several slices whose keys never meet: the slices' i-th files (base
    first, then logs oldest first) stacked as the i-th batch, so each key's rows keep their order."""
    depth: list[list[pa.Table]] = [[] for _ in range(max(len(ts) for ts in tables))]
    for ts in tables:
        for i, t in enumerate(ts):
            depth[i].append(t)
    return [d[0] if len(d) == 1 else pa.concat_tables(d) for d in depth]


def disjoint(tables: Sequence[Sequence[pa.Table]], config: TableConfig) -> bool:
    """Whether no record key is in the files of two of the slices (`tables`: each slice's files).
    Weir routes a key to one file group of its partition, so they never are unless something wrote
    around it; merged together, such slices would fold a key's rows across file groups."""
    key = list(config.record_key)
    parts = [pa.concat_tables([t.select(key) for t in ts]).append_column(
        "_slice", pa.array(np.full(sum(t.num_rows for t in ts), i, np.int32)))
        for i, ts in enumerate(tables)]
    pairs = pa.concat_tables(parts).group_by([*key, "_slice"]).aggregate([])  # distinct (key, slice)
    if len(key) == 1:  # one hash pass over the pairs instead of a second group-by
        return bool(pc.count_distinct(pairs.column(key[0]), mode="all").as_py() == pairs.num_rows)
    return bool(pairs.group_by(key).aggregate([]).num_rows == pairs.num_rows)


def slice_files(fs: FileSlice, *, base_only: bool = False) -> list[WriteStat]:
    """The files a read of the slice opens, in merge order: the base, then the logs (none when
    `base_only`)."""
    return list(fs.files if not base_only else ((fs.base,) if fs.base else ()))


def slice_schema(config: TableConfig, columns: Sequence[str]) -> pa.Schema:
    schema = file_schema(config)
    return pa.schema([schema.field(c) for c in columns])


def read_slice_files(storage: Storage, config: TableConfig, fs: FileSlice, columns: Sequence[str], *,
                     base_only: bool = False) -> list[pa.Table]:
    """The slice's files (see `slice_files`) with the wanted columns and the op columns."""
    paths = [f.path for f in slice_files(fs, base_only=base_only)]
    return read_files(storage, paths, [*columns, *op_columns(config)])


def merge_slice(config: TableConfig, fs: FileSlice, tables: Sequence[pa.Table], schema: pa.Schema, *,
                keep_deletes: bool = False) -> pa.Table:
    """The slice's merged rows from its files' tables (`read_slice_files`), in `schema`; columns of
    `schema` beyond the table's are ungrouped: each merged row takes them from its winning row."""
    if len(tables) == 1 and fs.base and not keep_deletes:
        base = tables[0]  # one row per key already; drop its tombstones
        if OP in base.column_names and pc.any(pc.equal(base.column(OP), 1)).as_py():
            base = base.filter(pc.equal(base.column(OP), 0))
        return conform(base, schema)  # a file older than a column reads it as null
    spec = projected_spec(merge_spec(config), [c for c in schema.names if c in file_schema(config).names])
    first_unique = fs.base is not None or _unique_first_log(tables, config)
    if keep_deletes:
        return merge_to_base(tables, spec, schema, first_unique=first_unique)
    return merge(tables, spec, schema, first_unique=first_unique)


def _unique_first_log(tables: Sequence[pa.Table], config: TableConfig) -> bool:
    """Whether a base-less slice's oldest log has one row per key, so the merge can take it as its
    base: only the later logs are folded, and its rows that no later one touches are copied as
    they are. A write precombines its rows, so its log usually qualifies (a key restated in
    several rows, as a column-group delete can be, does not); the check costs far less than
    folding the log's rows."""
    if not tables:
        return False
    first = tables[0]
    if any(k not in first.column_names for k in config.record_key):
        return False  # the merge refuses it with the reason
    return unique_keys([first.column(k) for k in config.record_key])


def file_names(fs: FileSlice, commit_times: pa.ChunkedArray | pa.Array) -> pa.Array:
    """The file holding each row's latest version: the log its commit wrote, else the base file."""
    logs = {int(lf.instant_time): lf.stat.file_name for lf in fs.logs}
    base = fs.base.file_name if fs.base else ""
    n = len(commit_times)
    if not logs:
        return pa.array(np.full(n, base, dtype=object), pa.string())
    names = pa.array([base, *logs.values()], pa.string())
    idx = pc.index_in(commit_times, value_set=pa.array(list(logs), pa.int64()))
    idx = pc.fill_null(pc.add(idx, 1), 0)
    return names.take(idx)
