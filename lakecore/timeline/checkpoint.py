"""Checkpoints in history files: the latest slice of every file group as of the last instant of each
row group, so a read as of an archived point decodes one checkpoint and one row group of instants,
not the write stats of every instant up to the point.

A history file written with checkpoints (docs/format.md) holds its rows in row groups cut where the
write stats since the last cut reach CHECKPOINT_EVERY or the size of the checkpoint before them (so
the checkpoints at most double what the file holds) or CHECKPOINT_EVERY instants. The last row of a
group carries, in the `slices` column, the latest slices as of its completion time: latest_slices of
every file written up to it, across all history files (null on the other rows). The file's key-value
metadata `weir.row_groups` lists each group's rows, completion and requested time ranges and cleans,
so readers pick row groups from the footer. Files written before have neither: read whole, as before.

Pure: where to cut, the checkpoints (latest_slices folded chunk by chunk: the latest slices of A + B
are those of latest_slices(A) + B, B completed after A), the row-group index. I/O: history_store.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.timeline.history import LIVE_SCHEMA, ROW_SCHEMA, files_of, latest_slices

SLICES = "slices"
INDEX_KEY = b"weir.row_groups"
CHECKPOINT_EVERY = 2048  # write stats (or instants) per row group, at least
SLICES_TYPE = pa.list_(pa.struct(list(LIVE_SCHEMA)))
FILE_SCHEMA = pa.schema([*ROW_SCHEMA, pa.field(SLICES, SLICES_TYPE)])


@dataclass(frozen=True)
class RowGroup:
    """One row group of a checkpointed history file, as its footer describes it."""

    rows: int
    min_completion: str
    max_completion: str
    min_requested: str
    max_requested: str
    cleans: int

    def to_json(self) -> list[Any]:
        return [self.rows, self.min_completion, self.max_completion, self.min_requested, self.max_requested,
                self.cleans]

    @classmethod
    def from_json(cls, v: list[Any]) -> RowGroup:
        return cls(int(v[0]), str(v[1]), str(v[2]), str(v[3]), str(v[4]), int(v[5]))


def index_of(metadata: dict[bytes, bytes] | None) -> tuple[RowGroup, ...] | None:
    """The row groups a history file's key-value metadata lists (None: written without checkpoints)."""
    raw = (metadata or {}).get(INDEX_KEY)
    if raw is None:
        return None
    return tuple(RowGroup.from_json(v) for v in json.loads(raw))


def index_metadata(groups: list[RowGroup]) -> dict[bytes, bytes]:
    return {INDEX_KEY: json.dumps([g.to_json() for g in groups], separators=(",", ":")).encode()}


def fold(before: pa.Table, files: pa.Table) -> pa.Table:
    """The latest slices given those as of a point (`before`) and the files completed after it."""
    return latest_slices(pa.concat_tables([before.cast(LIVE_SCHEMA), files]))


def with_checkpoints(before: pa.Table, rows: pa.Table, every: int | None = None) -> pa.Table:
    """History rows (sorted by completion time, all completed after `before`, the latest slices as of
    just before them) with the `slices` column: a checkpoint on the last row of each row group to be."""
    every = every or CHECKPOINT_EVERY
    n = rows.num_rows
    if n == 0:
        return rows.append_column(pa.field(SLICES, SLICES_TYPE), pa.nulls(0, SLICES_TYPE))
    counts = pc.fill_null(pc.list_value_length(rows.column("files").combine_chunks()), 0)
    cum = np.cumsum(counts.to_numpy(zero_copy_only=False))
    flat = files_of(rows)
    state, start, done = before.cast(LIVE_SCHEMA), 0, 0
    ends: list[int] = []
    states: list[pa.Table] = []
    while start < n:  # one pass per row group, not per instant
        reach = int(np.searchsorted(cum, done + max(every, state.num_rows), side="left")) + 1
        end = min(max(reach, start + 1), start + every, n)
        state = fold(state, flat.slice(done, int(cum[end - 1]) - done))
        ends.append(end)
        states.append(state)
        start, done = end, int(cum[end - 1])
    lengths = np.zeros(n, dtype=np.int64)
    last = np.array(ends) - 1
    lengths[last] = [s.num_rows for s in states]
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    mask = np.ones(n, dtype=bool)
    mask[last] = False
    values = pa.concat_tables(states).to_struct_array().combine_chunks()
    column = pa.ListArray.from_arrays(offsets, values, type=SLICES_TYPE, mask=pa.array(mask))
    return rows.append_column(pa.field(SLICES, SLICES_TYPE), column)


def cuts(rows: pa.Table) -> list[tuple[int, int]]:
    """(start, end) of each row group: ending after each row that carries a checkpoint."""
    valid = pc.is_valid(rows.column(SLICES)).to_numpy(zero_copy_only=False)
    ends = np.flatnonzero(valid) + 1
    if not len(ends) or ends[-1] != rows.num_rows:
        ends = np.append(ends, rows.num_rows)
    starts = np.concatenate([[0], ends[:-1]])
    return [(int(s), int(e)) for s, e in zip(starts, ends, strict=True) if e > s]


def describe(rows: pa.Table, groups: list[tuple[int, int]]) -> list[RowGroup]:
    """The index entry of each row group (rows sorted by completion time)."""
    out = []
    for s, e in groups:
        part = rows.slice(s, e - s)
        comp, req = part.column("completion_time"), part.column("requested_time")
        cleans = int(pc.sum(pc.equal(part.column("action"), "clean")).as_py() or 0)
        out.append(RowGroup(e - s, comp[0].as_py(), comp[-1].as_py(), pc.min(req).as_py(),
                            pc.max(req).as_py(), cleans))
    return out


def checkpoint_of(slices: pa.Table) -> pa.Table:
    """The checkpoint a row group's `slices` column carries (on its last row) as LIVE_SCHEMA rows."""
    flat = pc.list_flatten(slices.column(SLICES).combine_chunks())
    return pa.Table.from_struct_array(flat).cast(LIVE_SCHEMA) if len(flat) else LIVE_SCHEMA.empty_table()
