"""Time travel's guard rails: whether the table can be read as of a point, and from when it can.

Owns `check_readable`, which readers call with the point (Table.read, the Spark data source): a point
before the table's first commit is refused with BeforeFirstCommit, naming the earliest readable time
(an empty answer there would look like a table that lost its rows); a point whose view needs files a
completed clean deleted, with FilesCleaned. `earliest_readable` is that time: the first commit's
completion, or the newest clean's earliest retained point when it is later. Archived instants count:
the first commit may be in the history, and so may the newest clean.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow.compute as pc

from lakecore.concurrency import view_of
from lakecore.errors import BeforeFirstCommit, FilesCleaned
from lakecore.layout import FileSystemView
from lakecore.storage import Storage
from lakecore.timeline import CommitMetadata, Instant, Timeline, TimelineStore, to_epoch_ms

CLEAN = "clean"


def check_readable(storage: Storage, timeline: Timeline, point: str,
                   view: FileSystemView | None = None) -> None:
    """Raise BeforeFirstCommit when `point` is before the table's first commit (or the table has
    none), FilesCleaned when reading the table as of `point` needs files a completed clean deleted.
    `view`: the view as of `point`, when the caller has built it already."""
    store = TimelineStore(storage)
    bound = store.resolve_point(timeline, point)
    first = _first_completion(timeline)
    if first is None or bound < first:
        _refuse_before_first(storage, store, timeline, point)
    cleans = [c for c in timeline.completed if c.action == CLEAN]
    in_history = bound < timeline.archived.boundary
    if not cleans and not in_history:
        return
    view = view if view is not None else view_of(storage, store.as_of(timeline, point))
    needed = {f.path for s in view.slices for f in s.files}
    for c in cleans:
        extra = store.metadata(c).extra
        gone = needed.intersection(extra.get("deleted", ()))
        if gone:
            _refuse_cleaned(point, gone, f"clean {c.requested_time}", extra.get("earliest_retained"))
    if in_history:  # cleans archived since are in the history
        deleted = store.cleaned_in_history(timeline.archived.manifest)
        gone = needed.intersection(deleted.to_pylist()) if len(deleted) else set()
        if gone:
            _refuse_cleaned(point, gone, "an archived clean", None)


def earliest_readable(storage: Storage, timeline: Timeline) -> str | None:
    """The earliest point (a completion time) the table can be read as of; None without a commit."""
    first = _first_completion(timeline)
    if first is None:
        return None
    retained = _newest_clean(TimelineStore(storage), timeline)
    kept = retained.extra.get("earliest_retained") if retained is not None else None
    return max(first, str(kept)) if kept else first


def _first_completion(timeline: Timeline) -> str | None:
    """The completion time of the table's first completed instant (archival moves a prefix in
    completion order, so an archived one, when any, is the first)."""
    archived = [f.min_completion for f in timeline.archived.manifest.files]
    if archived:
        return min(archived)
    return timeline.completed[0].completion_time if timeline.completed else None


def _newest_clean(store: TimelineStore, timeline: Timeline) -> CommitMetadata | None:
    cleans = [c for c in timeline.completed if c.action == CLEAN]
    if cleans:
        return store.metadata(cleans[-1])
    if not timeline.archived.count:
        return None
    rows = store.history.rows(timeline.archived.manifest, ["action", "completion_time", "metadata"])
    rows = rows.filter(pc.equal(rows.column("action"), CLEAN))
    if not rows.num_rows:
        return None
    newest = rows.take([pc.index(rows.column("completion_time"),
                                 pc.max(rows.column("completion_time"))).as_py()])
    return CommitMetadata.loads(newest.column("metadata")[0].as_py(), source="history row of a clean",
                                table=store.storage.uri)


def _first_instant(store: TimelineStore, timeline: Timeline, completion: str) -> Instant | None:
    if timeline.archived.count:
        found = store.archived_instants(timeline.archived.manifest, "", completion)
        return found[0] if found else None
    return timeline.completed[0] if timeline.completed else None


def _refuse_before_first(storage: Storage, store: TimelineStore, timeline: Timeline, point: str) -> None:
    earliest = earliest_readable(storage, timeline)
    if earliest is None:
        raise BeforeFirstCommit(f"table {storage.uri} has no commit yet, so there is nothing to read as of "
                                f"{point} ({iso(point)}); read it without as_of (it is empty)")
    first = _first_completion(timeline) or earliest
    inst = _first_instant(store, timeline, first)
    which = f"its first commit (instant {inst.requested_time})" if inst is not None else "its first commit"
    since = "" if earliest == first else \
        f"; a clean keeps time travel from {earliest} ({iso(earliest)}) on"
    raise BeforeFirstCommit(
        f"table {storage.uri} has no commit as of {point} ({iso(point)}): {which} completed at {first} "
        f"({iso(first)}){since}. Read as of {earliest} or later (instant times: `weir table timeline "
        f"{storage.uri}`), or without as_of for the latest snapshot", earliest=earliest)


def _refuse_cleaned(point: str, gone: set[str], by: str, since: object) -> None:
    raise FilesCleaned(f"reading as of {point} needs {len(gone)} file(s) (e.g. {min(gone)}) that {by} "
                       f"deleted; time travel works from {since or 'the latest commit'} on: read a later "
                       "point, or retain more with the clean policy")


def iso(instant_time: str) -> str:
    """An instant time as an ISO-8601 UTC timestamp with milliseconds ("before every instant" for zeros)."""
    if set(instant_time) == {"0"}:
        return "before every instant"
    dt = datetime.fromtimestamp(to_epoch_ms(instant_time) / 1000, tz=UTC)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")
