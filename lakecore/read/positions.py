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

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lakecore.config import TableConfig
from lakecore.errors import InvalidInput
from lakecore.layout import FileSlice
from lakecore.read.slices import merge_columns, merge_slice, read_slice_files, slice_files, slice_schema
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
    the positions of the rows that read shows. Reads the key, ordering and op columns only."""
    if not base_only and config.merge_mode == "partial_update":
        raise InvalidInput(f"table {config.name!r} merges column groups: a merged row takes columns from "
                           "several files, which no row positions express; use its base files only "
                           "(the read-optimized view)")
    files = slice_files(fs, base_only=base_only)
    columns = merge_columns(config, [])
    tables = read_slice_files(storage, config, fs, columns, base_only=base_only)
    tagged = [t.append_column(ROW_ID, pa.array(_row_ids(i, t.num_rows))) for i, t in enumerate(tables)]
    schema = slice_schema(config, columns).append(pa.field(ROW_ID, pa.int64()))
    merged = merge_slice(config, fs, tagged, schema)
    ids = np.sort(np.asarray(merged.column(ROW_ID).to_numpy(), dtype=np.int64))
    which = ids >> _POSITION_BITS
    bounds = np.searchsorted(which, np.arange(len(files) + 1))
    low = np.int64((1 << _POSITION_BITS) - 1)
    return tuple(FileRows(stat, t.num_rows, ids[bounds[i]:bounds[i + 1]] & low)
                 for i, (stat, t) in enumerate(zip(files, tables, strict=True)))


def _row_ids(file_index: int, rows: int) -> Positions:
    return np.arange(rows, dtype=np.int64) + (np.int64(file_index) << _POSITION_BITS)
