"""Row ids that span a base and the changes that follow it.

Owns one numbering of the rows the merge reads: rows [0, n) are the base's (when there is one,
with unique keys), rows [n, n + m) the later changes', so a larger id is always a newer row.
Winners are row ids in this space; gathering a column by row ids reads each side in place,
without concatenating the large base. Must not decide winners or shape the output.
"""

from __future__ import annotations

from collections.abc import Callable
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

    def delete(self, rows: IntArray) -> BoolArray:
        """Whether each row is a delete (False for NO_ROW)."""
        return self._flags(rows, lambda c: c.delete)

    def ordered(self, group: int, rows: IntArray) -> BoolArray:
        """Whether each row holds an ordering value for `group` (False for NO_ROW)."""
        return self._flags(rows, lambda c: c.ordered[group])

    def gather(self, column: str, rows: IntArray) -> pa.Array | pa.ChunkedArray:
        """Values of `column` at `rows`, null at NO_ROW."""
        later = self.later.table.column(column)
        if self.base is None:
            return _take(later, rows, rows >= 0)
        offset = self.offset
        in_base = (rows >= 0) & (rows < offset)
        in_later = rows >= offset
        base = self.base.table.column(column)
        if not in_base.any():
            return _take(later, rows - offset, in_later)
        if not in_later.any():
            return _take(base, rows, in_base)
        return pc.if_else(
            pa.array(in_base), _take(base, rows, in_base), _take(later, rows - offset, in_later)
        )

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


def _take(column: pa.ChunkedArray, rows: IntArray, valid: BoolArray) -> pa.Array | pa.ChunkedArray:
    if valid.all():
        return column.take(pa.array(rows))
    return column.take(pa.array(np.where(valid, rows, 0), mask=~valid))
