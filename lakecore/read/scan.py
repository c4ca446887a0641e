"""The streaming scan: a query's merged rows as record batches, file slice by file slice.

Owns the pipeline of every snapshot and read-optimized query (`Table.read`, `Table.scan`, the CLI,
the Spark data source): plan (which slices, which columns; pure) -> per slice read, merge and finish
on the slice pool -> batches in slice order. At most `in_flight` slices are read or merged ahead of
the consumer, so a scan holds a few slices at a time whatever the table's size; `to_arrow` keeps them
all. Slices are chosen in one place, `plan_scan`: a step that skips slices (data skipping by
statistics) slots in there, before anything is read.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from itertools import islice
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import META_COLUMNS, TableConfig
from lakecore.formats import RowGroupFilter
from lakecore.layout import FileSlice, FileSystemView
from lakecore.read.slices import merge_columns, read_slices_together
from lakecore.read.snapshot import (
    check_columns,
    check_filter,
    filter_columns,
    finish,
    merged_slice,
    no_slices,
    prune,
    slice_pool,
)
from lakecore.storage import Storage


@dataclass(frozen=True)
class ScanPlan:
    """What a scan reads: its slices in order, the file columns merged, and how rows are finished."""

    slices: tuple[FileSlice, ...]
    wanted: tuple[str, ...]               # file columns read and merged (the query's and what merging needs)
    columns: tuple[str, ...] | None       # the result's columns (None: the table's, meta first with `meta`)
    filter: pc.Expression | None
    meta: bool                            # the meta columns are computed
    base_only: bool                       # read-optimized: base files only, no merge
    where: RowGroupFilter | None = None   # the part of `filter` row groups are skipped by (read_slice)


def plan_scan(view: FileSystemView, config: TableConfig, *, columns: Sequence[str] | None = None,
              partitions: Mapping[str, Any] | None = None, filter: pc.Expression | None = None,
              with_meta: bool = False, base_only: bool = False) -> ScanPlan:
    """The plan of a query over `view`; bad columns or partition fields raise InvalidInput here.
    Slices are pruned by partition, then skipped by their files' column statistics (read/skipping.py)."""
    # imported here, not at the top: skipping imports pyarrow.dataset and so pandas (~55 MB), a read's cost
    from lakecore.read.skipping import keep_slices, pushable

    check_columns(config, columns)
    meta = with_meta or bool(columns and set(columns) & set(META_COLUMNS))
    # Only the meta columns and a filter naming it need the commit time: a plain read skips decoding it.
    asked = config.schema.names if columns is None else [c for c in columns if c not in META_COLUMNS]
    wanted = merge_columns(config, [*asked, *filter_columns(filter)], commit_time=meta)
    check_filter(config, filter, wanted, columns, meta=meta)
    slices = keep_slices(prune(view, config, partitions), config, filter, base_only=base_only)
    pushed = pushable(config, filter)
    where = RowGroupFilter(pushed, config.schema) if pushed is not None else None
    # with_meta shows the meta columns before the columns asked for, as it does before all of them
    shown = None if columns is None else \
        tuple([*(m for m in META_COLUMNS if with_meta and m not in columns), *columns])
    return ScanPlan(tuple(slices), tuple(wanted), shown, filter, meta, base_only, where)


# Slices of up to this many stored rows (their files' records) are small: read and merged together with
# the small slices next to them in the same partition, up to this many rows in all. A small slice's read
# costs mostly its fixed part (~0.7 ms of small Arrow and numpy calls to merge a base and a log, ~0.35 ms
# to read a base alone), which one merge of many pays once.
SMALL_SLICE_ROWS = 1 << 16


def read_units(plan: ScanPlan) -> list[tuple[FileSlice, ...]]:
    """The plan's slices in order, as the units one task reads: runs of small slices of one partition
    (`SMALL_SLICE_ROWS`), all with a base file or all logs only, go together; every other slice alone.
    A plan with meta columns (which name each row's file) or a read-optimized one reads every slice
    alone, and a filtered one every slice that is one base file (its row groups are skipped by the
    filter)."""
    if plan.meta or plan.base_only:
        return [(fs,) for fs in plan.slices]
    units: list[tuple[FileSlice, ...]] = []
    run: list[FileSlice] = []
    rows = 0
    for fs in plan.slices:
        size = sum(f.records for f in fs.files)
        alone = plan.where is not None and fs.base is not None and len(fs.files) == 1
        small = size <= SMALL_SLICE_ROWS and not alone
        if run and (not small or run[0].partition != fs.partition or rows + size > SMALL_SLICE_ROWS
                    or (run[0].base is None) != (fs.base is None)):
            units.append(tuple(run))
            run, rows = [], 0
        if small:
            run.append(fs)
            rows += size
        else:
            units.append((fs,))
    if run:
        units.append(tuple(run))
    return units


def default_in_flight() -> int:
    """Slices read or merged ahead of a scan's consumer: one per core (what the slice pool runs)."""
    return max(os.cpu_count() or 2, 2)


class Scan:
    """A planned query, read when asked: `to_batches()`, `to_arrow_batch_reader()` (which DuckDB and
    Polars consume through the Arrow C stream, as they do the scan itself) or `to_arrow()`. Every
    call reads the files again; the rows are those of the view the scan was planned on."""

    def __init__(self, storage: Storage, config: TableConfig, plan: ScanPlan, *,
                 in_flight: int | None = None) -> None:
        self.storage = storage
        self.config = config
        self.plan = plan
        self.in_flight = max(in_flight or default_in_flight(), 1)
        self.schema = self._finish(no_slices(config, list(plan.wanted), meta=plan.meta)).schema

    @property
    def slices(self) -> tuple[FileSlice, ...]:
        return self.plan.slices

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The merged rows as record batches in the scan's schema, slice by slice."""
        for table in self.to_tables():
            yield from table.to_batches()

    def to_arrow_batch_reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches())

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.to_arrow_batch_reader().__arrow_c_stream__(requested_schema)

    def to_arrow(self) -> pa.Table:
        """All the rows in one table (what `Table.read` returns)."""
        parts = list(self.to_tables())
        return pa.concat_tables(parts) if parts else self.schema.empty_table()

    def to_tables(self) -> Iterator[pa.Table]:
        """One finished table per slice (or per batch of small slices read together, see
        `read_units`), in slice order; at most `in_flight` of them ahead of the caller. Nothing is read
        before the first one is asked for; stopping early cancels what has not started and waits for
        what has, so no read outlives the iteration."""
        units = read_units(self.plan)
        todo = iter(units)
        if len(units) == 1:
            yield self._one(next(todo))
            return
        pending: deque[Future[pa.Table]] = deque(slice_pool.submit(self._one, unit)
                                                  for unit in islice(todo, self.in_flight))
        try:
            while pending:
                table = pending.popleft().result()
                following = next(todo, None)
                if following is not None:
                    pending.append(slice_pool.submit(self._one, following))
                yield table
        finally:
            for future in pending:
                if not future.cancel():
                    future.exception()  # started: wait (its error, if any, is not the caller's now)

    def _one(self, unit: tuple[FileSlice, ...]) -> pa.Table:
        plan = self.plan
        if len(unit) > 1:
            rows = read_slices_together(self.storage, self.config, unit, list(plan.wanted))
        else:
            rows = merged_slice(self.storage, self.config, unit[0], list(plan.wanted), meta=plan.meta,
                                base_only=plan.base_only, where=plan.where)
        table = self._finish(rows)
        return table if table.schema.equals(self.schema) else table.cast(self.schema)

    def _finish(self, rows: pa.Table) -> pa.Table:
        plan = self.plan
        return finish(rows, self.config, columns=plan.columns, filter=plan.filter, with_meta=plan.meta)
