"""Row ids that span a base and the changes that follow it.

Owns one numbering of the rows the merge reads: rows [0, n) are the base's (when there is one,
with unique keys), rows [n, n + m) the later changes', so a larger id is always a newer row.
Winners are row ids in this space; gathering a column by row ids reads each side in place,
without concatenating the large base. Must not decide winners or shape the output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.merge.changes import BoolArray, Changes
from lakecore.merge.keys import IntArray

NO_ROW = -1


@dataclass(frozen=True)
class RowSpace:
    """The rows of an optional base followed by later changes; -1 (NO_ROW) means no row."""

    base: Changes | None
    later: Changes

    @property
    def offset(self) -> int:
        """Id of the first later row."""
        return 0 if self.base is None else self.base.num_rows

    def deleted(self, group: int, rows: IntArray) -> BoolArray:
        """Whether each row's op for `group` is a delete (False for NO_ROW)."""
        return self._flags(rows, lambda c: c.deleted[group])

    def ordered(self, group: int, rows: IntArray) -> BoolArray:
        """Whether each row holds an ordering value for `group` (False for NO_ROW)."""
        return self._flags(rows, lambda c: c.ordered[group])

    def gather(self, columns: Sequence[str], rows: IntArray) -> list[pa.Array | pa.ChunkedArray]:
        """Values of each of `columns` at `rows`, null at NO_ROW."""
        later = self.later.table
        if self.base is None:
            pick = _picker(rows, rows >= 0)
            return [pick(later.column(c)) for c in columns]
        base, offset = self.base.table, self.offset
        in_base = (rows >= 0) & (rows < offset)
        in_later = rows >= offset
        if not in_base.any():
            pick = _picker(rows - offset, in_later)
            return [pick(later.column(c)) for c in columns]
        if not in_later.any():
            pick = _picker(rows, in_base)
            return [pick(base.column(c)) for c in columns]
        from_base, from_later = _picker(rows, in_base), _picker(rows - offset, in_later)
        choose = pa.array(in_base)
        return [
            pc.if_else(choose, from_base(base.column(c)), from_later(later.column(c))) for c in columns
        ]

    def _flags(self, rows: IntArray, pick: Callable[[Changes], BoolArray]) -> BoolArray:
        valid = rows >= 0
        offset = self.offset
        result = np.zeros(len(rows), dtype=np.bool_)
        if self.base is not None:
            in_base = valid & (rows < offset)
            result[in_base] = pick(self.base)[rows[in_base]]
        in_later = rows >= offset
        result[in_later] = pick(self.later)[rows[in_later] - offset]
        return result


def _picker(rows: IntArray, valid: BoolArray) -> Callable[[pa.ChunkedArray], pa.Array | pa.ChunkedArray]:
    """A function taking `rows` (null where not `valid`) from columns of one table.

    The index array is built once for all columns. When the rows all lie in one chunk (one
    batch, often) it takes from that chunk alone, which skips Arrow's chunk resolution; when they
    are consecutive, in order, it slices.
    """
    if not valid.any():
        return lambda column: pa.nulls(len(rows), column.type)
    everything = bool(valid.all())
    picked = rows if everything else rows[valid]
    low, high = int(picked.min()), int(picked.max())
    if everything and high - low + 1 == len(rows) and bool((np.diff(rows) == 1).all()):
        # Consecutive rows in order (a log whose every row won, often): a slice, copying nothing.
        return lambda column: column.slice(low, len(rows))
    indices: dict[int, pa.Array] = {}

    def take(column: pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        source, start = column, 0
        for chunk in column.chunks:
            if start <= low and high < start + len(chunk):
                source = chunk
                break
            start += len(chunk)
        else:
            start = 0
        if start not in indices:
            local = rows - start
            indices[start] = (
                pa.array(local) if everything else pa.array(np.where(valid, local, 0), mask=~valid)
            )
        return source.take(indices[start])

    return take
