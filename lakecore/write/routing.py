"""Routing: which file group each record goes to (bucket index within its partition).

A record's file group is (partition path, bucket file id), where the bucket comes from the record key
through the table's bucket hash (`layout.buckets` or `layout.murmur3`). Vectorized: partition values
are dictionary-encoded, combined with the bucket into one integer per row, and rows are split by a
single stable argsort. Routing only decides each group's row positions: the rows are gathered by the
task that writes the group (`FileGroupRows.rows`), so the gathering runs on the task threads, in
parallel, instead of one copy of the whole input before any task starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import TableConfig
from lakecore.layout import bucket_file_id, partition_path
from lakecore.layout.buckets import table_bucket_of


@dataclass(frozen=True)
class FileGroupRows:
    """One file group's rows of a write: `source`'s rows at `positions` (in that order), or all of
    `source` when `positions` is None."""

    partition: str
    file_id: str
    source: pa.Table
    combined: bool = False  # already one row per key (precombined before routing)
    positions: np.ndarray | None = field(default=None, compare=False)

    @property
    def rows(self) -> pa.Table:
        """The group's rows, gathered from `source` on each access (a task reads them once)."""
        return self.source if self.positions is None else self.source.take(self.positions)

    @property
    def num_rows(self) -> int:
        return self.source.num_rows if self.positions is None else len(self.positions)


def file_group_codes(rows: pa.Table, config: TableConfig) -> tuple[np.ndarray, list[str]]:
    """(code per row, partition path per partition code); code = partition code * buckets + bucket."""
    n = rows.num_rows
    keys = [rows.column(c) for c in config.record_key]
    buckets = table_bucket_of(keys, config.buckets, config.bucket_hash or "weir_v1").astype(np.int64)
    if not config.partition_fields:
        return buckets, [""]
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


def route(rows: pa.Table, config: TableConfig, *, combined: bool = False) -> list[FileGroupRows]:
    """Split rows by file group; `combined`: the rows are already one per key."""
    if rows.num_rows == 0:
        return []
    codes, paths = file_group_codes(rows, config)
    order = _group_order(codes)
    ordered = codes[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    stops = np.r_[starts[1:], len(ordered)]
    if len(starts) == 1:
        part, bucket = divmod(int(ordered[0]), config.buckets)
        return [FileGroupRows(paths[part], bucket_file_id(bucket), rows, combined)]
    out = []
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        part, bucket = divmod(int(ordered[start]), config.buckets)
        out.append(FileGroupRows(paths[part], bucket_file_id(bucket), rows, combined, order[start:stop]))
    return out
