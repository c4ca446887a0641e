"""The timeline on storage: `<base>/.weir/timeline/`. The only module that writes instant files.

State transitions are file creations with create-if-absent semantics; nothing is renamed or
rewritten, so a crash leaves either the old state or the new one. Completed instant files are
immutable, so their parsed metadata is cached per process by (table URI, file name). The one
exception is `replace_damaged`, for `weir table repair`: a body that never parsed (so nobody cached
or acted on it) replaced atomically by the one rebuilt from the instant's files (docs/format.md).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.errors import AlreadyExists, CorruptMetadata, CorruptTimeline, HistoryMoved, InvalidInstantState
from lakecore.storage import Staged, Storage, stage
from lakecore.timeline.history import Archived, Manifest, archived_files, instants_of
from lakecore.timeline.history_store import TIMELINE_DIR, HistoryStore, completion_of, pointer_version
from lakecore.timeline.instant import WRITE_ACTIONS, Instant, State, parse_file_name
from lakecore.timeline.metadata import CommitMetadata
from lakecore.timeline.timeline import Timeline

_cache: OrderedDict[tuple[str, str], CommitMetadata] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_SIZE = 20_000


class TimelineStore:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def _path(self, name: str) -> str:
        return f"{TIMELINE_DIR}/{name}"

    @property
    def history(self) -> HistoryStore:
        return HistoryStore(self.storage)

    def load(self) -> Timeline:
        """The active timeline, with the summary of the archived one (one listing: the pointer to the
        current history manifest sits among the instant files)."""
        for attempt in range(3):
            names = self.storage.list_names(TIMELINE_DIR)
            try:
                archived = self.history.summary(pointer_version(names))
                break
            except HistoryMoved:  # an archival replaced that version since the listing: list again
                if attempt == 2:
                    raise CorruptTimeline(
                        f"the history manifest the timeline points at (version {pointer_version(names)}) "
                        f"is missing: run `weir table repair {self.storage.uri} --run` to fall back to "
                        "the previous manifest and reactivate the instants archived since (or restore "
                        "the manifest from a backup)") from None
        found = (_parsed(name) for name in names)
        return Timeline.of((i for i in found if i is not None), archived)

    # -- questions that may reach into the archived timeline -----------------------------------

    def resolve_point(self, timeline: Timeline, point: str) -> str:
        """Timeline.resolve_point, also for the requested times of archived instants."""
        boundary = timeline.archived.boundary
        if timeline.find(point) is not None or not boundary or point > boundary:
            return timeline.resolve_point(point)
        manifest = timeline.archived.manifest
        rows = self.history.rows(manifest, ["requested_time", "completion_time"],
                                 keep=lambda f: f.min_requested <= point <= f.max_requested,
                                 groups=lambda g: g.min_requested <= point <= g.max_requested)
        return completion_of(rows, point) or point

    def writes_after(self, timeline: Timeline, after: str = "") -> tuple[int, str | None]:
        """How many writes (commit, deltacommit) completed after the timeline time `after`, archived ones
        included (only history files completed after it are read, two columns), and a completion time no
        write completed after: the newest active write's, else the archived boundary (None: the table
        has completed nothing). What a TableService trigger counts from its last run on."""
        times = [i.completion_time for i in timeline.completed
                 if i.action in ("commit", "deltacommit") and i.completion_time]
        count = sum(1 for t in times if t > after)
        boundary = timeline.archived.boundary
        if timeline.archived.count and boundary > after:
            rows = self.history.rows(timeline.archived.manifest, ["completion_time", "action"],
                                     keep=lambda f: f.max_completion > after,
                                     groups=lambda g: g.max_completion > after)
            mask = pc.and_(pc.greater(rows.column("completion_time"), after),
                           pc.is_in(rows.column("action"), pa.array(["commit", "deltacommit"])))
            count += int(pc.sum(mask.cast(pa.int64())).as_py() or 0)
        return count, max(times, default=None) or boundary or None

    def as_of(self, timeline: Timeline, point: str) -> Timeline:
        """The timeline as of a point: Timeline.as_of, or for a point inside the archived range, a
        timeline whose archived files are the latest slices as of that point, from the history."""
        bound = self.resolve_point(timeline, point)
        if bound >= timeline.archived.boundary:
            return timeline.as_of(bound)
        manifest = timeline.archived.manifest
        files = archived_files(self.history.slices_as_of(manifest, bound))
        return Timeline((), Archived(manifest, files, bound=bound))

    def archived_instants(self, manifest: Manifest, start: str = "", end: str | None = None
                          ) -> list[Instant]:
        """Archived instants completed in (start, end], oldest first; their metadata is cached, so
        `metadata()` answers for them without touching the history again."""
        rows = self.history.rows(manifest, ["requested_time", "completion_time", "action", "metadata"],
                                 keep=lambda f: f.max_completion > start
                                 and (end is None or f.min_completion <= end),
                                 groups=lambda g: g.max_completion > start
                                 and (end is None or g.min_completion <= end))
        comp = rows.column("completion_time")
        mask = pc.greater(comp, start)
        if end is not None:
            mask = pc.and_(mask, pc.less_equal(comp, end))
        rows = rows.filter(mask)
        out = instants_of(rows)
        for inst, body in zip(out, rows.column("metadata").to_pylist(), strict=True):
            _remember(self.storage.uri, inst.file_name,
                      CommitMetadata.loads(body, source=f"history row {inst.requested_time}",
                                           table=self.storage.uri))
        return out

    def cleaned_in_history(self, manifest: Manifest) -> pa.Array:
        """Paths deleted by archived cleans."""
        rows = self.history.rows(manifest, ["action", "deleted"], groups=lambda g: g.cleans > 0)
        rows = rows.filter(pc.equal(rows.column("action"), "clean"))
        return pc.list_flatten(rows.column("deleted").combine_chunks()) if rows.num_rows else \
            pa.array([], pa.string())

    def create_requested(self, instant: Instant, plan: bytes = b"") -> Instant:
        if instant.state is not State.REQUESTED:
            raise InvalidInstantState(f"{instant} must be requested to be created")
        # a plan (table services) must survive a power loss to be resumed; an empty file need not
        self.storage.write_if_absent(self._path(instant.requested_file()), plan, durable=bool(plan))
        return instant

    def abandon_requested(self, instant: Instant) -> None:
        """Delete a requested instant its creator gives up on before anything refers to it (no
        inflight file, no data, no marker)."""
        if instant.state is not State.REQUESTED:
            raise InvalidInstantState(f"{instant} is not requested; only requested instants are abandoned")
        self.storage.delete(self._path(instant.requested_file()))

    def transition_inflight(self, instant: Instant) -> Instant:
        if instant.state is not State.REQUESTED:
            raise InvalidInstantState(f"{instant} is not requested; only requested instants go inflight")
        inflight = Instant(instant.requested_time, instant.action, State.INFLIGHT)
        self.storage.write_if_absent(self._path(inflight.file_name), b"", durable=False)
        return inflight

    def stage_completion(self, metadata: CommitMetadata) -> Staged:
        """A completed instant file's bytes written ahead of the lock (its name, which holds the
        completion time, is drawn under it): `complete(..., staged=)` then only links it."""
        return stage(self.storage, TIMELINE_DIR, metadata.dumps())

    def complete(self, instant: Instant, completion_time: str, metadata: CommitMetadata, *,
                 staged: Staged | None = None, sync: bool = True) -> Instant:
        """Create the completed instant file (the commit point), from `metadata` or from the bytes
        `staged` for it (stage_completion). `sync=False` (staged only): the caller calls
        `staged.sync()` before it reports the commit durable (after releasing the lock)."""
        if instant.state is not State.INFLIGHT:
            raise InvalidInstantState(f"{instant} is not inflight; only inflight instants complete")
        done = Instant(instant.requested_time, instant.action, State.COMPLETED, completion_time)
        try:
            if staged is not None:
                staged.publish(self._path(done.file_name), sync=sync)
            else:
                self.storage.write_if_absent(self._path(done.file_name), metadata.dumps())
        except AlreadyExists:
            raise InvalidInstantState(f"{done} is already completed") from None
        _remember(self.storage.uri, done.file_name, metadata)
        return done

    def metadata(self, instant: Instant) -> CommitMetadata:
        if not instant.is_completed:
            raise InvalidInstantState(f"{instant} has no commit metadata until it completes")
        key = (self.storage.uri, instant.file_name)
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                return hit
        path = self._path(instant.file_name)
        try:
            data = self.storage.read(path)
        except FileNotFoundError:
            return self._archived_metadata(instant, path)
        meta = CommitMetadata.loads(data, source=path, table=self.storage.uri)
        _remember(self.storage.uri, instant.file_name, meta)
        return meta

    def replace_damaged(self, instant: Instant, metadata: CommitMetadata) -> bool:
        """Replace the body of a completed instant file that does not parse with `metadata`, in one
        atomic write (a rename locally, one PUT on an object store: never a moment without the file,
        which would make the instant look pending). Call under the table lock, with the damaged bytes
        kept elsewhere. False, and nothing written, when the body parses (restored meanwhile)."""
        try:
            self.metadata(instant)
            return False
        except CorruptMetadata:
            pass
        self.storage.write(self._path(instant.file_name), metadata.dumps())
        _remember(self.storage.uri, instant.file_name, metadata)
        return True

    def damaged(self, timeline: Timeline) -> list[tuple[Instant, CorruptMetadata]]:
        """The active timeline's completed instants whose files do not parse (read-only)."""
        out = []
        for instant in timeline.completed:
            try:
                self.metadata(instant)
            except CorruptMetadata as exc:
                out.append((instant, exc))
        return out

    def verify(self, timeline: Timeline) -> None:
        """Raise CorruptTimeline if any completed instant of the active timeline does not parse:
        writers call this before they start, so nothing commits on top of a damaged timeline (the
        metadata is cached per process, so this reads each instant file once)."""
        bad = self.damaged(timeline)
        if bad:
            names = ", ".join(i.file_name for i, _ in bad)
            raise CorruptTimeline(
                f"the timeline of {self.storage.uri} has damaged instant file(s) {names} ({bad[0][1]}); "
                f"writers refuse the table until `weir table repair {self.storage.uri} --run` rebuilds "
                "them from their data files (see `weir table check`)") from bad[0][1]

    def _archived_metadata(self, instant: Instant, path: str) -> CommitMetadata:
        """A completed instant's file vanishes only when archival moved it: answer from the history."""
        t = instant.requested_time
        rows = self.history.rows(self.history.manifest(), ["requested_time", "metadata"],
                                 keep=lambda f: f.min_requested <= t <= f.max_requested)
        hit = rows.column("metadata").filter(pc.equal(rows.column("requested_time"), t))
        if not len(hit):
            raise CorruptMetadata(f"instant file {path} vanished and is not in the archived timeline; "
                                  "retry the read (a rollback or restore may have removed it)")
        meta = CommitMetadata.loads(hit[0].as_py(), source=f"history row {t}", table=self.storage.uri)
        _remember(self.storage.uri, instant.file_name, meta)
        return meta

    def latest_schema(self, timeline: Timeline) -> list[dict[str, object]] | None:
        """The schema (JSON form) of the newest completed write that recorded one."""
        for instant in reversed(timeline.completed):
            if instant.action in WRITE_ACTIONS:
                schema = self.metadata(instant).schema
                if schema:
                    return schema
        return timeline.archived.manifest.schema

    def read_plan(self, instant: Instant) -> bytes:
        return self.storage.read(self._path(instant.requested_file()))


_names: dict[str, Instant | None] = {}


def _parsed(name: str) -> Instant | None:
    """parse_file_name, memoized: a timeline file's name never changes meaning, and the commit
    critical section reloads the timeline, so parsing thousands of names each time would show."""
    hit = _names.get(name, _MISSING)
    if hit is _MISSING:
        if len(_names) > 200_000:
            _names.clear()
        hit = _names[name] = parse_file_name(name)
    return hit  # type: ignore[return-value]


_MISSING = object()


def _remember(uri: str, name: str, meta: CommitMetadata) -> None:
    with _cache_lock:
        _cache[(uri, name)] = meta
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)


def clear_cache() -> None:
    """Forget cached commit metadata (after files were changed behind lakecore's back)."""
    with _cache_lock:
        _cache.clear()
