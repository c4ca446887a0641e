"""Incremental query: what changed in (start, end] of completion time.

Only file groups written by write instants that completed in the range are read; of their merged
rows (deletes kept) as of `end`, those whose last change was made by one of those instants are
returned, with `_weir_op` = 'upsert' or 'delete'.

An overwrite in the range is a write like any other: its rows are returned as upserts. The rows it
replaced are not returned as deletes (it writes no tombstones); a consumer that mirrors the table
sees an overwrite in the range through `Table.timeline()` (a replacecommit whose operation is
insert_overwrite[_table]) and re-reads the replaced partitions from a snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import COMMIT_TIME, META_COLUMNS, OP, TableConfig
from lakecore.layout import build_view
from lakecore.read.slices import merge_columns
from lakecore.read.snapshot import check_columns, finish, read_slices
from lakecore.storage import Storage
from lakecore.timeline import Instant, Timeline, TimelineStore, scope_of


def read_changes(storage: Storage, config: TableConfig, timeline: Timeline, start: str, end: str | None,
                 *, columns: Sequence[str] | None = None) -> pa.Table:
    check_columns(config, columns)
    store = TimelineStore(storage)
    lo = store.resolve_point(timeline, start)
    last = timeline.last_completed()
    hi = store.resolve_point(timeline, end) if end is not None else \
        (last.completion_time if last and last.completion_time else lo)
    changed = list(timeline.completed_between(lo, hi))
    if lo < timeline.archived.boundary:  # the range starts in the archived timeline
        changed = store.archived_instants(timeline.archived.manifest, lo, hi) + changed
    writes = [i for i in changed if _is_write(store, i)]
    touched: set[tuple[str, str]] = set()
    for i in writes:
        touched |= store.metadata(i).file_groups
    view = build_view(store.as_of(timeline, hi), store.metadata)
    slices = [s for s in view.slices if (s.partition, s.file_id) in touched]
    rows = read_slices(storage, config, slices, merge_columns(config, None), meta=True, keep_deletes=True)
    times = pa.array([int(i.requested_time) for i in writes], pa.int64())
    rows = rows.filter(pc.is_in(rows.column(COMMIT_TIME), value_set=times))
    ops = pc.if_else(pc.equal(rows.column(OP), 1), "delete", "upsert")
    out = finish(rows, config, columns=None, filter=None, with_meta=True)
    out = out.add_column(len(META_COLUMNS), OP, ops)
    if columns is not None:
        out = out.select([*[c for c in META_COLUMNS if c not in columns], OP, *columns])
    return out


def _is_write(store: TimelineStore, instant: Instant) -> bool:
    if instant.action == "replacecommit":  # an overwrite, not a clustering (which changes no row)
        return scope_of(store.metadata(instant)) is not None
    return instant.action in ("commit", "deltacommit")
