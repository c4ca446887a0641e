"""Which rows of each data file a read shows: the row positions behind a merged read, for engines that
read the data files themselves (publishing: Iceberg position deletes, Delta deletion vectors).

Computed by the read itself, never by a second copy of the merge rules: each file's rows carry a row
id (file index and position) into `merge_slice` as an ungrouped column, which the merge takes from
each key's winning row. Exact where every column of a merged row comes from one stored row: tables
with one column group (`commit_time`, `event_time`: the row winner is the group's winner) and
base-only reads of every table (a base row is shown as it is stored, tombstones dropped). A
`partial_update` table's merged row takes columns from several files, so no row positions can
express it: asked for that, `shown_rows` refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lakecore.config import OP, TableConfig
from lakecore.errors import InvalidInput
from lakecore.formats import FileStats
from lakecore.layout import FileSlice
from lakecore.read.slices import (
    merge_columns,
    merge_slice,
    read_slice_files,
    read_together,
    slice_files,
    slice_schema,
    stacked,
)
from lakecore.storage import Storage
from lakecore.timeline import WriteStat

ROW_ID = "_weir_row_id"  # internal: (file index << _POSITION_BITS) | row position, carried through the merge
_POSITION_BITS = 40      # a trillion rows per file; 2**23 files per slice

Positions = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class FileRows:
    """One data file of a slice: how many rows it stores, and which of them the read shows."""

    stat: WriteStat
    rows: int            # rows stored in the file (tombstones and deletes included)
    shown: Positions     # sorted positions (0-based) of the rows the read shows

    @property
    def hidden(self) -> Positions:
        """Sorted positions of the rows the read does not show."""
        mask = np.ones(self.rows, dtype=np.bool_)
        mask[self.shown] = False
        return np.flatnonzero(mask).astype(np.int64)


def shown_rows(storage: Storage, config: TableConfig, fs: FileSlice, *,
               base_only: bool = False) -> tuple[FileRows, ...]:
    """Per file the read of slice `fs` opens (base first, then logs; the base only with `base_only`),
    the positions of the rows that read shows. Reads the key, ordering and op columns only, and
    nothing for a slice that is one base file whose statistics say it holds no tombstone."""
    if not base_only and config.merge_mode == "partial_update":
        raise InvalidInput(f"table {config.name!r} merges column groups: a merged row takes columns from "
                           "several files, which no row positions express; use its base files only "
                           "(the read-optimized view)")
    files = slice_files(fs, base_only=base_only)
    if len(files) == 1 and fs.base is not None and (rows := _untouched_rows(files[0])) is not None:
        return (FileRows(files[0], rows, np.arange(rows, dtype=np.int64)),)
    tables = read_slice_files(storage, config, fs, merge_columns(config, []), base_only=base_only)
    return _shown(config, fs, [files], [tables])[0]


def _shown(config: TableConfig, fs: FileSlice, files: Sequence[Sequence[WriteStat]],
           tables: Sequence[Sequence[pa.Table]]) -> list[tuple[FileRows, ...]]:
    """Per slice (its files and their tables: one slice's, or several whose keys never meet), the rows
    one merge shows: the slices' i-th files stacked as its i-th batch, each row tagged with its file."""
    index = 0
    tagged = []
    for ts in tables:
        tagged.append([t.append_column(ROW_ID, pa.array(_row_ids(index + i, t.num_rows)))
                       for i, t in enumerate(ts)])
        index += len(ts)
    schema = slice_schema(config, merge_columns(config, [])).append(pa.field(ROW_ID, pa.int64()))
    merged = merge_slice(config, fs, stacked(tagged), schema)
    ids = np.sort(np.asarray(merged.column(ROW_ID).to_numpy(), dtype=np.int64))
    bounds = np.searchsorted(ids >> _POSITION_BITS, np.arange(index + 1))
    low = np.int64((1 << _POSITION_BITS) - 1)
    out, index = [], 0
    for fl, ts in zip(files, tables, strict=True):
        out.append(tuple(FileRows(stat, t.num_rows, ids[bounds[index + i]:bounds[index + i + 1]] & low)
                         for i, (stat, t) in enumerate(zip(fl, ts, strict=True))))
        index += len(fl)
    return out


def shown_rows_of_slices(storage: Storage, config: TableConfig, slices: Sequence[FileSlice]
                         ) -> list[tuple[FileRows, ...]]:
    """`shown_rows` of each of `slices` (one partition's, each a base and logs), merged in one call
    instead of one per slice: the slices' i-th files stacked as the merge's i-th batch, each row
    tagged with its file. Keys never meet across slices only if no key is in two of them, which is
    checked (as is that every file has the same columns); else each slice is merged alone."""
    if not all(fs.base is not None and len(fs.files) > 1 for fs in slices) or \
            len({fs.partition for fs in slices}) > 1 or config.merge_mode == "partial_update":
        return [shown_rows(storage, config, fs) for fs in slices]
    files, tables, as_one = read_together(storage, config, slices, merge_columns(config, []))
    if not as_one:
        return [_shown(config, fs, [fl], [ts])[0] for fs, fl, ts in zip(slices, files, tables, strict=True)]
    return _shown(config, slices[0], files, tables)


def _untouched_rows(base: WriteStat) -> int | None:
    """The row count of a base file read alone that shows every row it stores (no tombstone, as its
    statistics say: the op column is never 1), so nothing needs reading; None when unknown."""
    if base.stats is None:
        return None
    stats = FileStats.from_json(base.stats)
    op = stats.columns.get(OP)
    if op is None or not (op.nulls == stats.rows or op.max == 0):
        return None
    return stats.rows


def _row_ids(file_index: int, rows: int) -> Positions:
    return np.arange(rows, dtype=np.int64) + (np.int64(file_index) << _POSITION_BITS)
