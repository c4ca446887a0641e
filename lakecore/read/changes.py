"""Incremental query: what changed in (start, end] of completion time.

Only file groups written by write instants that completed in the range are read; of their merged
rows (deletes kept) as of `end`, those whose last change was made by one of those instants are
returned, with `_weir_op` = 'upsert' or 'delete'. A delete is returned only for a record the table
held at the start (a delete naming keys the table never held, or a record inserted and deleted within
the range, changed nothing a consumer saw): the touched file groups' keys as of the start are read
again when the range holds deletes (when a clean removed those files, every delete is returned as
written, as before).

An overwrite in the range is a write like any other: its rows are returned as upserts. The rows it
replaced are not returned as deletes (it writes no tombstones); a consumer that mirrors the table
sees an overwrite in the range through `Table.timeline()` (a replacecommit whose operation is
insert_overwrite[_table]) and re-reads the replaced partitions from a snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.config import COMMIT_TIME, META_COLUMNS, OP, PARTITION_PATH, RECORD_KEY, TableConfig
from lakecore.errors import InvalidInput
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
    if hi < lo:   # compared as completed: a write requested first may complete last
        to = f"the end {end}" + (f" (completed {hi})" if hi != end else "")
        since = f"the start {start}" + (f" (completed {lo})" if lo != start else "")
        raise InvalidInput(f"{to} is before {since}: changes are read by completion time, from the start "
                           "(exclusive) to the end (inclusive); swap them")
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
    deletes = pc.equal(ops, "delete")
    if pc.any(deletes).as_py():   # a delete of a record the table did not hold at the start changed nothing
        keep = pc.or_(pc.invert(deletes), _held_at(storage, config, store, timeline, lo, touched, out))
        out, ops = out.filter(keep), ops.filter(keep)
    out = out.add_column(len(META_COLUMNS), OP, ops)
    if columns is not None:
        out = out.select([*[c for c in META_COLUMNS if c not in columns], OP, *columns])
    return out


def _held_at(storage: Storage, config: TableConfig, store: TimelineStore, timeline: Timeline, point: str,
             touched: set[tuple[str, str]], rows: pa.Table) -> pa.Array:
    """Whether each of `rows` (with meta columns) names a record the table held as of `point`: the touched
    file groups' keys then, merged, read again (key and ordering columns only). All True when a clean has
    removed files of that view (the deletes are then told as written)."""
    view = build_view(store.as_of(timeline, point), store.metadata)
    slices = [s for s in view.slices if (s.partition, s.file_id) in touched]
    wanted = merge_columns(config, list(config.record_key))   # (meta: file names need the commit time)
    try:
        held = read_slices(storage, config, slices, wanted, meta=True)
    except FileNotFoundError:   # a clean removed the files of then: every delete is told, as written
        return pa.array(np.ones(rows.num_rows, dtype=bool))
    before = finish(held, config, columns=[RECORD_KEY, PARTITION_PATH], filter=None, with_meta=True)

    def ident(t: pa.Table) -> pa.ChunkedArray:
        return pc.binary_join_element_wise(t.column(PARTITION_PATH).cast(pa.string()),
                                           t.column(RECORD_KEY).cast(pa.string()), "\x1f")

    return pc.is_in(ident(rows), value_set=pa.chunked_array(ident(before)).combine_chunks())


def _is_write(store: TimelineStore, instant: Instant) -> bool:
    if instant.action == "replacecommit":  # an overwrite, not a clustering (which changes no row)
        return scope_of(store.metadata(instant)) is not None
    return instant.action in ("commit", "deltacommit")
