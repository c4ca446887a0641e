"""Routing: which file group each record goes to (bucket index within its partition).

A record's file group is (partition path, bucket file id), where the bucket comes from the record key
through the table's bucket hash (`layout.buckets` or `layout.murmur3`). Vectorized: partition values
are dictionary-encoded, combined with the bucket into one integer per row, and rows are split by a
single stable argsort (or, into a few groups, by each task's own pass over the codes). Routing only
decides each group's row positions: the rows are gathered by the task that writes the group
(`FileGroupRows.rows`), so the gathering runs on the task threads, in parallel, instead of one copy of
the whole input before any task starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import TableConfig
from lakecore.layout import bucket_file_id, partition_path
from lakecore.layout.buckets import table_bucket_of


@dataclass(frozen=True)
class CodeRows:
    """The positions of the rows whose file-group code is `code`, found when asked (`rows`): with few
    groups, each task finds its own rows with one pass over the codes, in parallel, instead of one
    sort of every row's code before any task starts."""

    codes: np.ndarray
    code: int
    count: int

    def positions(self) -> np.ndarray:
        return np.flatnonzero(self.codes == self.code)


@dataclass(frozen=True)
class FileGroupRows:
    """One file group's rows of a write: `source`'s rows at `positions` (ascending: a stable sort's
    group, or the rows of one code), or all of `source` when `positions` is None."""

    partition: str
    file_id: str
    source: pa.Table
    combined: bool = False  # already one row per key (precombined before routing)
    positions: np.ndarray | CodeRows | None = field(default=None, compare=False)
    # `source` holds keys, no delete and no op of a column group's own (decided once per write)
    upserts_only: bool = False

    @property
    def rows(self) -> pa.Table:
        """The group's rows, gathered from `source` on each access (a task reads them once)."""
        positions = self.row_positions()
        return self.source if positions is None else take_ascending(self.source, positions)

    def row_positions(self) -> np.ndarray | None:
        """The ascending positions of the group's rows in `source` (None: all of them)."""
        if self.positions is None:
            return None
        return self.positions.positions() if isinstance(self.positions, CodeRows) else self.positions

    @property
    def num_rows(self) -> int:
        if self.positions is None:
            return self.source.num_rows
        return self.positions.count if isinstance(self.positions, CodeRows) else len(self.positions)


def take_ascending(source: pa.Table, positions: np.ndarray) -> pa.Table:
    """`source.take(positions)` for ascending positions, without concatenating chunks: Arrow's take
    of a column of several chunks first copies the whole column into one array, so each file group's
    gather copied the whole input's column (a 16M-row write into 4 buckets: 4 copies of each string
    column, whose numpy conversion gives several chunks). A column of several chunks is taken chunk
    by chunk instead (the positions falling in each chunk are a contiguous run of ascending
    positions) and stays chunked; the Parquet writer and the merge take chunked columns."""
    if all(col.num_chunks <= 1 for col in source.columns):
        return source.take(positions)
    local: dict[tuple[int, ...], list[tuple[int, np.ndarray]]] = {}  # chunk lengths -> chunk's positions
    columns = []
    for col in source.columns:
        if col.num_chunks <= 1:
            columns.append(col.take(positions))
            continue
        lengths = tuple(len(chunk) for chunk in col.chunks)
        if lengths not in local:
            starts = np.r_[0, np.cumsum(lengths)]
            bounds = np.asarray(np.searchsorted(positions, starts), dtype=np.int64)
            cuts: list[int] = bounds.tolist()
            local[lengths] = [(i, positions[a:b] - starts[i])
                              for i, (a, b) in enumerate(pairwise(cuts)) if b > a]
        columns.append(pa.chunked_array([col.chunk(i).take(p) for i, p in local[lengths]], type=col.type))
    return pa.Table.from_arrays(columns, schema=source.schema)


def file_group_codes(rows: pa.Table, config: TableConfig) -> tuple[np.ndarray, list[str]]:
    """(code per row, partition path per partition code); code = partition code * buckets + bucket."""
    n = rows.num_rows
    keys = [rows.column(c) for c in config.record_key]
    buckets = table_bucket_of(keys, config.buckets, config.bucket_hash or "weir_v1")
    if not config.partition_fields:
        return buckets, [""]
    buckets = buckets.astype(np.int64)
    part = np.zeros(n, dtype=np.int64)
    dictionaries = []
    for name in config.partition_fields:
        enc = pc.dictionary_encode(rows.column(name)).combine_chunks()
        values = enc.dictionary.to_pylist()
        part = part * len(values) + enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        dictionaries.append(values)
    uniq, part = np.unique(part, return_inverse=True)
    paths = []
    for code in uniq.tolist():
        vals = []
        for values in reversed(dictionaries):
            code, idx = divmod(code, len(values))
            vals.append(values[idx])
        paths.append(partition_path(config.partition_fields, tuple(reversed(vals))))
    return part * config.buckets + buckets, paths


def partitions(rows: pa.Table, config: TableConfig) -> list[pa.Table]:
    """The rows of each partition (one table per partition path present)."""
    if not config.partition_fields or rows.num_rows == 0:
        return [rows]
    codes, paths = file_group_codes(rows, config)
    if len(paths) == 1:
        return [rows]
    part = codes // config.buckets
    order = _group_order(part)
    counts = np.bincount(part, minlength=len(paths))
    taken = rows.take(pa.array(order))
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    return [taken.slice(int(a), int(n)) for a, n in zip(starts, counts, strict=True) if n]


def _group_order(codes: np.ndarray) -> np.ndarray:
    """Row positions grouped by code, each group in row order (a stable argsort). Codes below 2**16
    (a few partitions times the buckets: nearly always) sort as uint16, which numpy radix-sorts in
    one linear pass instead of a comparison sort of int64s, about a tenth of the time."""
    if len(codes) and int(codes.min()) >= 0 and int(codes.max()) < 1 << 16:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    return np.argsort(codes, kind="stable")


_FEW_GROUPS = 8  # up to this many groups, each task finds its rows itself (`CodeRows`)


def route(rows: pa.Table, config: TableConfig, *, combined: bool = False,
          upserts_only: bool = False) -> list[FileGroupRows]:
    """Split rows by file group; `combined`: the rows are already one per key; `upserts_only`: they
    hold keys, no delete and no op of a column group's own (`FileGroupRows.upserts_only`)."""
    if rows.num_rows == 0:
        return []
    codes, paths = file_group_codes(rows, config)
    counts = np.bincount(codes)
    present = np.flatnonzero(counts)
    if len(present) == 1:
        part, bucket = divmod(int(present[0]), config.buckets)
        return [FileGroupRows(paths[part], bucket_file_id(bucket), rows, combined, upserts_only=upserts_only)]
    if len(present) <= _FEW_GROUPS:
        selections: list[np.ndarray | CodeRows] = [CodeRows(codes, int(c), int(counts[c])) for c in present]
    else:
        order = _group_order(codes)
        stops = np.cumsum(counts[present])
        starts = stops - counts[present]
        selections = [order[a:b] for a, b in zip(starts.tolist(), stops.tolist(), strict=True)]
    out = []
    for code, selection in zip(present.tolist(), selections, strict=True):
        part, bucket = divmod(code, config.buckets)
        out.append(FileGroupRows(paths[part], bucket_file_id(bucket), rows, combined, positions=selection,
                                 upserts_only=upserts_only))
    return out
