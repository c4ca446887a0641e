"""Publishing one target: load what it shows, plan the new snapshot (incrementally when it can), pin
it for clean, commit it, trim the pins. The I/O shell around `plan.py` and the target modules.

    load      the target's current snapshot (a half-done pointer from a killed publish is finished)
    decide    incremental when the target's last snapshot shows an instant still on the active
              timeline with the same view, and no undo (rollback/restore of completed instants)
              completed since; else a full rebuild (an undo also resets the published history)
    plan      rows shown per file of the changed file groups, from lakecore's merged read
    pin       under the table lock: no clean (pending, or completed since we looked) deletes a file
              of the snapshot, then `.weir/publish/<target>.json` += the new instant
    commit    the target writes everything, its pointer last (Iceberg metadata, Delta log entry)
    register  (a catalog given) the catalog's table moves to the new snapshot
    trim      files only expired snapshots read are deleted (Iceberg), and the pins become exactly
              the snapshots the retention keeps: after the catalog moved, so a kill or a catalog
              failure before leaves the catalog's snapshot readable (a Delta log drops older
              versions lazily, at its next checkpoint: until then such a version is listed but, as
              after Delta's own VACUUM, its files may be gone)

A kill at any step leaves the previous published snapshot or the new one; pins are a superset of
what is retained in between, so clean never deletes what a retained snapshot needs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from types import ModuleType
from typing import Any, Literal

from lakecore.concurrency import Lock, ensure_held, view_of
from lakecore.config import TableConfig
from lakecore.errors import CorruptMetadata, NotPublishable, PublishConflict, PublishError
from lakecore.formats import read_footer_stats
from lakecore.layout import FileSlice, FileSystemView, build_view
from lakecore.publish.catalog import CatalogRef, register
from lakecore.publish.plan import PublishView, choose_view, plan_publish, schema_fingerprint
from lakecore.publish.snapshots import PublishedSnapshot, Retention, retained
from lakecore.read.positions import FileRows, shown_rows, shown_rows_of_slices
from lakecore.services.clean import load_clean_plan
from lakecore.services.published import read_pins, write_pins
from lakecore.storage import Storage
from lakecore.timeline import Timeline, TimelineStore
from lakecore.timeline.metadata import counted

Target = Literal["iceberg", "delta"]
TARGETS: tuple[Target, ...] = ("iceberg", "delta")


@dataclass(frozen=True)
class PublishResult:
    target: Target
    snapshot: PublishedSnapshot   # what readers of the target see now
    full: bool                    # a full rebuild (else only changed file groups were planned)
    groups: int                   # file groups planned (changed ones, or all)
    files: int                    # their data files listed
    hidden: int                   # rows those files hide
    location: str                 # what readers open: Iceberg's metadata file, Delta's table root
    up_to_date: bool = False      # the instant was published already: nothing written
    note: str = ""                # what readers of this view do not see
    catalog: str = ""             # what the catalog's table points at now (publish(catalog=...))
    format_version: int | None = None  # Iceberg's format version (2 or 3); None for Delta

    def describe(self) -> str:
        s = self.snapshot
        v3 = self.format_version == 3  # v2 is said as before: "iceberg"
        name = f"{self.target} v3" if v3 else self.target
        if self.up_to_date:
            return f"{name}: already shows instant {s.instant} ({s.view})"
        how = "full rebuild" if self.full else counted(self.groups, "changed file group")
        note = f"; {self.note}" if self.note else ""
        return (f"{name}: snapshot {s.id} shows instant {s.instant} ({s.view}); {how}, "
                f"{counted(self.files, 'data file')}, {counted(self.hidden, 'row')} hidden"
                f"{' by deletion vectors' if v3 else ''}{note}")

    def to_json(self) -> dict[str, Any]:
        s = self.snapshot
        return {"format": self.target, "location": self.location, "up_to_date": self.up_to_date,
                "snapshot": {"id": s.id, "instant": s.instant, "completion": s.completion, "view": s.view},
                "full": self.full, "file_groups": self.groups, "files": self.files,
                "hidden_rows": self.hidden, "note": self.note, "catalog": self.catalog,
                "format_version": self.format_version}


def _module(target: str) -> ModuleType:
    if target == "iceberg":
        from lakecore.publish import iceberg

        return iceberg
    if target == "delta":
        from lakecore.publish import delta

        return delta
    raise NotPublishable(f"unknown publish format {target!r}; use one of {', '.join(TARGETS)}")


def published_since(storage: Storage, instant_time: str, *, inclusive: bool = True) -> tuple[str, ...]:
    """The published snapshots that show `instant_time` (unless not `inclusive`) or a later instant, per
    target ("iceberg: 2 snapshots, of instants A to B"): an undo of those instants deletes files they
    read. Metadata that does not read is said as such: it never stops the undo."""
    said = []
    for target in TARGETS:
        try:
            snapshots = _module(target).load(storage).snapshots
        except (CorruptMetadata, OSError, ValueError, KeyError, TypeError) as exc:
            said.append(f"{target}: its published metadata does not read ({type(exc).__name__}); publish "
                        "again to rebuild it")
            continue
        shown = sorted(s.instant for s in snapshots
                       if s.instant > instant_time or (inclusive and s.instant == instant_time))
        if shown:
            which = shown[0] if len(shown) == 1 else f"{shown[0]} to {shown[-1]}"
            said.append(f"{target}: {counted(len(shown), 'snapshot')}, of instant{'s' * (len(shown) > 1)} "
                        f"{which}")
    return tuple(said)


def publish(storage: Storage, config: TableConfig, lock: Lock, target: str, *, view: str | None = None,
            keep: int = 10, catalog: CatalogRef | None = None, format_version: int | None = None
            ) -> PublishResult:
    """Publish the table's latest completed instant as `target` ("iceberg" or "delta") metadata beside
    it. `view`: "snapshot" (merged, the default) or "read_optimized" (base files only; the only view
    of column-group tables). `keep`: published snapshots retained for time travel at most. `catalog`:
    an Iceberg catalog whose table then points at the new metadata (registered on the first publish),
    the last step: a catalog that fails raises CatalogError with every published file in place.
    `format_version`: Iceberg's, 2 (position-delete files) or 3 (deletion vectors); None: the version
    the table is published in already (2 for a new one). 2 after 3 is refused."""
    if catalog is not None and target != "iceberg":
        raise NotPublishable(f"a catalog registers Iceberg tables; publish --format iceberg to register "
                             f"{catalog.table} (a {target} table is read by its path, {storage.uri})")
    if format_version is not None and target != "iceberg":
        raise NotPublishable(f"format version {format_version} is Iceberg's; a {target} table has none to "
                             "choose: leave it out, or publish --format iceberg")
    result, trim = _publish(storage, config, lock, target, view=view, keep=keep,
                            format_version=format_version)
    if catalog is not None:
        state = _module(target).load(storage)
        if state.metadata is None:
            raise PublishError(f"the Iceberg metadata just published at {result.location} does not read "
                               "back; publish again (a full rebuild)")
        result = replace(result, catalog=register(catalog, result.location, state.metadata).describe(catalog))
    trim()  # only now: until the catalog moved, it may read a snapshot the retention drops
    return result


def _publish(storage: Storage, config: TableConfig, lock: Lock, target: str, *, view: str | None,
             keep: int, format_version: int | None) -> tuple[PublishResult, Callable[[], None]]:
    """The new snapshot committed, and the trim step (see the module docstring) still to run."""
    mod = _module(target)
    kind = choose_view(config, view)
    mod.check_schema(config.schema)  # a type the target cannot hold: refused before anything is written
    store = TimelineStore(storage)
    timeline = store.load()
    instant = timeline.last_completed()
    if instant is None:
        raise NotPublishable(f"table {config.name!r} has no completed instant to publish; write to it first")
    state = mod.load(storage)
    # Iceberg's format version, chosen (a downgrade refused) before anything is written
    version = mod.format_version(state, format_version) if target == "iceberg" else None
    opts = {"version": version} if version is not None else {}
    published: list[PublishedSnapshot] = state.snapshots
    last = published[-1] if published else None
    if last is not None and (last.instant, last.view, last.schema) == \
            (instant.requested_time, kind, schema_fingerprint(config.schema)) and \
            (version is None or mod.shows_version(state, version)):
        return PublishResult(target, last, False, 0, 0, 0, mod.location(storage),  # type: ignore[arg-type]
                             up_to_date=True, note=_note(config, kind), format_version=version), lambda: None
    continues = last is not None and _continues(store, timeline, last, kind) and \
        mod.can_continue(state, storage.uri.rstrip("/"), **opts)
    if continues and last is not None:
        now, since = _written_since(store, timeline, last.completion)
    else:
        now, since = view_of(storage, timeline), None
    plan = plan_publish(config, config.schema, instant, now, kind, partial(_rows, storage, config, kind),
                        since=since)
    retention = Retention(keep=max(keep, 1), after=_weir_earliest(store, timeline))
    if last is not None and not continues and _undone_since(store, timeline, last):
        retention = Retention(keep=1)  # an undo rewrote the history the older snapshots showed
        published = []
    _pin(storage, lock, target, (*[s.completion for s in published], instant.completion_time or ""),
         now if since is None else None, timeline)
    snapshot = mod.commit(storage, plan, state, retention, **opts)
    kept = retained([*published, snapshot], retention)

    def trim() -> None:
        mod.expire(storage, state.snapshots, kept)
        write_pins(storage, target, tuple(s.completion for s in kept))

    return PublishResult(target, snapshot, plan.full, len(plan.groups), len(plan.files),  # type: ignore[arg-type]
                         sum(len(f.hidden) for f in plan.files), mod.location(storage),
                         note=_note(config, kind), format_version=version), trim


def _note(config: TableConfig, kind: PublishView) -> str:
    if kind == "snapshot":
        return ""
    if config.merge_mode == "partial_update":
        return ("column groups: readers see the last compacted state only (compact the table, then publish, "
                "to show newer writes)")
    return "read-optimized: readers see the base files only, not the writes in log files since"



_pool = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="weir-publish")


_BATCH = 256  # file groups merged in one call


def _rows(storage: Storage, config: TableConfig, kind: PublishView, slices: Sequence[FileSlice]
          ) -> list[tuple[FileRows, ...]]:
    """Per slice, its files' shown rows (`shown_rows`). Slices of a base and logs are merged up to
    _BATCH of one partition at a time (`shown_rows_of_slices`): a full rebuild pays per merge, not
    per file group."""
    def stats(rows: tuple[FileRows, ...]) -> tuple[FileRows, ...]:
        return tuple(r if r.stat.stats is not None else _with_footer_stats(storage, r) for r in rows)

    base_only = kind == "read_optimized"
    together: dict[str, list[int]] = {}
    alone = []
    for i, fs in enumerate(slices):
        if not base_only and fs.base is not None and len(fs.files) > 1:
            together.setdefault(fs.partition, []).append(i)
        else:
            alone.append([i])
    chunks = alone + [ix[at:at + _BATCH] for ix in together.values() for at in range(0, len(ix), _BATCH)]

    def one(chunk: list[int]) -> list[tuple[FileRows, ...]]:
        if len(chunk) == 1:
            return [stats(shown_rows(storage, config, slices[chunk[0]], base_only=base_only))]
        return [stats(r) for r in shown_rows_of_slices(storage, config, [slices[i] for i in chunk])]

    out: list[tuple[FileRows, ...]] = [()] * len(slices)
    done = _pool.map(one, chunks) if len(chunks) > 1 else map(one, chunks)
    for chunk, rows in zip(chunks, done, strict=True):
        for i, r in zip(chunk, rows, strict=True):
            out[i] = r
    return out


def _with_footer_stats(storage: Storage, r: FileRows) -> FileRows:
    """A file written before Weir recorded column statistics: from its footer (one read), once per
    publish that lists it anew."""
    stats = read_footer_stats(storage, r.stat.path).to_json()
    return FileRows(replace(r.stat, stats=stats), r.rows, r.shown)


def _written_since(store: TimelineStore, timeline: Timeline, completion: str
                   ) -> tuple[FileSystemView, FileSystemView]:
    """(now, as of `completion`): the views of the file groups instants completed after `completion`
    wrote to, the only ones whose slices can differ (a replace empties a group by writing its empty
    base; a clean removes older slices only; an undo or archival past `completion` means a full
    rebuild). Neither the whole table's view nor its comparison is built."""
    later = [i for i in timeline.completed if (i.completion_time or "") > completion]
    groups = {(st.partition, st.file_id) for i in later for st in store.metadata(i).write_stats}
    return (build_view(timeline, store.metadata, only=groups),
            build_view(timeline.as_of(completion), store.metadata, only=groups))


def _continues(store: TimelineStore, timeline: Timeline, last: PublishedSnapshot, kind: PublishView) -> bool:
    """Whether the last published snapshot is a view this timeline still builds: same view, its instant
    completed as recorded on the active timeline, and no undo since."""
    if last.view != kind or last.completion < timeline.archived.boundary:
        return False
    shown = timeline.find(last.instant)
    if shown is None or shown.completion_time != last.completion:
        return False
    return not _undone_since(store, timeline, last)


def _undone_since(store: TimelineStore, timeline: Timeline, last: PublishedSnapshot) -> bool:
    return any(i.action in ("rollback", "restore") and (i.completion_time or "") > last.completion
               and store.metadata(i).extra.get("undone") for i in timeline.completed)


def _weir_earliest(store: TimelineStore, timeline: Timeline) -> str | None:
    """The earliest point the newest completed clean kept readable (None: no clean, all of it)."""
    cleans = [i for i in timeline.completed if i.action == "clean"]
    if not cleans:
        return None
    earliest = store.metadata(cleans[-1]).extra.get("earliest_retained")
    return str(earliest) if earliest else None


def _pin(storage: Storage, lock: Lock, target: str, points: Sequence[str], view: FileSystemView | None,
         seen: Timeline) -> None:
    """Pin `points` for clean, after checking under the table lock that no clean planned meanwhile
    (or completed since `seen` was loaded) deletes a file of `view` (None: the view of `seen`, built
    only when there is such a clean)."""
    store = TimelineStore(storage)
    with lock:
        timeline = store.load()
        old = {i.requested_time for i in seen.completed}
        cleans = [i for i in timeline.instants if i.action == "clean" and i.requested_time not in old]
        if cleans and view is None:
            view = view_of(storage, seen)
        needed = {f.path for s in view.slices for f in s.files} if view is not None else set()
        for c in cleans:
            doomed = set(load_clean_plan(storage, c).files) if not c.is_completed else \
                set(store.metadata(c).extra.get("deleted", ()))
            gone = needed & doomed
            if gone:
                raise PublishConflict(f"clean {c.requested_time} deletes {sorted(gone)[:3]}, which the "
                                      "snapshot being published needs; publish again (the newest instant)")
        try:
            pinned = read_pins(storage, target)
        except CorruptMetadata:
            pinned = ()  # rewritten below with every point the target may still show
        ensure_held(lock, f"pinning the published {target} snapshot")
        write_pins(storage, target, (*pinned, *points))
