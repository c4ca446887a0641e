"""Deciding, per record key and column group, which row wins.

Owns the fold of the merge contract (see `lakecore.merge`). Per key and group, over the rows that
carry the group in commit order, a row replaces the current winner iff the row has no ordering
value (a commit-time group, or a key-only delete), or the current winner has none, or the row's
ordering value is >= the current one. Equivalently: after the last barrier (a carrying row without
an ordering value) the greatest ordering value wins, ties to the newest row; with nothing after
it, the barrier itself wins.

Entry points: `reduce` folds a run of changes (grouped by dense key codes with `ufunc.at`, no
sort), `singles` is that fold for a run whose rows all have distinct keys, and `combine` folds a
reduced run onto a base whose keys are unique (vectorized over the matched keys only). Must not
gather column values or shape the output (`assemble.py` does).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.merge.changes import BoolArray, Changes
from lakecore.merge.keys import IntArray
from lakecore.merge.rows import NO_ROW, RowSpace
from lakecore.merge.spec import MergeSpec


@dataclass(frozen=True)
class Winners:
    """Per key and group (in spec order): the winning row id, NO_ROW where no row carried it.

    `reset[g][k]` says group g's rows for key k included a barrier, so the result does not depend
    on anything older; a reduced batch must restate that (see `assemble.py`).
    """

    rows: tuple[IntArray, ...]
    reset: tuple[BoolArray, ...]

    @property
    def num_keys(self) -> int:
        return len(self.rows[0])

    def select(self, keys: IntArray) -> Winners:
        """The winners of the keys at positions `keys`."""
        return Winners(rows=tuple(r[keys] for r in self.rows), reset=tuple(r[keys] for r in self.reset))

    def padded(self, n: int) -> Winners:
        """These winners followed by `n` keys that no row carried."""
        return Winners(
            rows=tuple(np.concatenate([r, np.full(n, NO_ROW, dtype=np.int64)]) for r in self.rows),
            reset=tuple(np.concatenate([r, np.zeros(n, dtype=np.bool_)]) for r in self.reset),
        )


def reduce(changes: Changes, codes: IntArray, n_keys: int, spec: MergeSpec) -> Winners:
    """Fold `changes` per key; `codes` are dense key codes in [0, n_keys), one per row."""
    rows: list[IntArray] = []
    reset: list[BoolArray] = []
    for i, group in enumerate(spec.groups):
        carriers = np.flatnonzero(changes.carries[i])  # row ids, oldest first
        keys = codes[carriers]
        competing = changes.ordered[i][carriers]
        last_barrier = np.full(n_keys, NO_ROW, dtype=np.int64)
        if not competing.all():
            barriers = ~competing
            np.maximum.at(last_barrier, keys[barriers], carriers[barriers])
            # Ordered rows compete by value only after their key's last barrier.
            competing &= carriers > last_barrier[keys]
        winner = last_barrier
        if group.ordering is not None and competing.any():
            carriers, keys = carriers[competing], keys[competing]
            winner = last_barrier.copy()
            # A key with one competing row needs no comparison; only crowded keys are compared.
            alone = np.bincount(keys, minlength=n_keys)[keys] == 1
            winner[keys[alone]] = carriers[alone]
            if not alone.all():
                carriers, keys = carriers[~alone], keys[~alone]
                values = _ordinals(changes.table.column(group.ordering), carriers)
                top = np.full(n_keys, _lowest(values), dtype=values.dtype)
                np.maximum.at(top, keys, values)
                best = values == top[keys]
                # Competing rows are newer than the barrier, so the max id is the newest best row.
                np.maximum.at(winner, keys[best], carriers[best])
        rows.append(winner)
        reset.append(last_barrier != NO_ROW)
    return Winners(rows=tuple(rows), reset=tuple(reset))


def singles(changes: Changes) -> Winners:
    """`reduce` of changes whose rows all have distinct keys, key k being row k (one precombined
    log, usually): each row wins the groups it carries, and resets those it carries as a barrier."""
    ids = np.arange(changes.num_rows, dtype=np.int64)
    return Winners(
        rows=tuple(np.where(carries, ids, NO_ROW) for carries in changes.carries),
        reset=tuple(c & ~o for c, o in zip(changes.carries, changes.ordered, strict=True)),
    )


def combine(space: RowSpace, base_rows: IntArray, later: Winners, spec: MergeSpec) -> Winners:
    """Fold the reduced `later` changes onto the base rows of the same keys.

    `base_rows[k]` is key k's base row (NO_ROW if the base lacks k); `later.rows` are ids of
    `space.later`'s own rows. The result holds row ids of `space`.
    """
    base = space.base
    assert base is not None, "combine needs a base"
    offset = space.offset
    has_base = base_rows >= 0
    rows: list[IntArray] = []
    reset: list[BoolArray] = []
    for i, group in enumerate(spec.groups):
        mine = later.rows[i]
        has_later = mine >= 0
        carried = _at(base.carries[i], base_rows, has_base)
        base_barrier = carried & ~_at(base.ordered[i], base_rows, has_base)
        # The later winner needs no comparison when a barrier stands before it, on either side.
        take_later = has_later & (later.reset[i] | ~carried | base_barrier)
        compare = has_later & ~take_later
        if compare.any():
            assert group.ordering is not None, "commit-time winners are always barriers"
            mine_values = space.later.table.column(group.ordering).take(pa.array(mine[compare]))
            base_values = base.table.column(group.ordering).take(pa.array(base_rows[compare]))
            newer = pc.greater_equal(mine_values, base_values)
            take_later[compare] = np.asarray(newer.to_numpy(zero_copy_only=False), dtype=np.bool_)
        rows.append(np.where(take_later, mine + offset, np.where(carried, base_rows, NO_ROW)))
        reset.append(take_later & (later.reset[i] | base_barrier))
    return Winners(rows=tuple(rows), reset=tuple(reset))


def _at(flags: BoolArray, rows: IntArray, valid: BoolArray) -> BoolArray:
    """`flags[rows]`, False where not `valid`."""
    if flags.all():  # usual for a base: every row carries and orders every group
        return valid.copy()
    result = np.zeros(len(rows), dtype=np.bool_)
    result[valid] = flags[rows[valid]]
    return result


def _ordinals(column: pa.ChunkedArray, rows: IntArray) -> npt.NDArray[np.int64] | npt.NDArray[np.float64]:
    """Numbers that order like the column's values at `rows` (which hold no nulls)."""
    kind = column.type
    if pa.types.is_floating(kind):
        floats: npt.NDArray[np.float64] = np.asarray(
            column.cast(pa.float64()).fill_null(0).to_numpy(), dtype=np.float64
        )
        return floats[rows]
    if pa.types.is_date32(kind) or pa.types.is_time32(kind):
        column = column.cast(pa.int32())
    if pa.types.is_temporal(kind) or pa.types.is_boolean(kind) or (
        pa.types.is_integer(kind) and not pa.types.is_uint64(kind)
    ):
        ints: npt.NDArray[np.int64] = np.asarray(
            column.cast(pa.int64()).fill_null(0).to_numpy(), dtype=np.int64
        )
        return ints[rows]
    # Strings, decimals, uint64: Arrow's own order, as dense ranks.
    ranks: npt.NDArray[np.int64] = np.asarray(
        pc.rank(column.take(pa.array(rows)), sort_keys="ascending", tiebreaker="dense").to_numpy(),
        dtype=np.int64,
    )
    return ranks


def _lowest(values: npt.NDArray[np.int64] | npt.NDArray[np.float64]) -> float | int:
    if values.dtype.kind == "f":
        return float("-inf")
    return int(np.iinfo(np.int64).min)
