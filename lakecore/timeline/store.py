"""The timeline on storage: `<base>/.weir/timeline/`. The only module that writes instant files.

State transitions are file creations with create-if-absent semantics; nothing is renamed or
rewritten, so a crash leaves either the old state or the new one. Completed instant files are
immutable, so their parsed metadata is cached per process by (table URI, file name).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from lakecore.errors import AlreadyExists, CorruptMetadata, InvalidInstantState
from lakecore.storage import Storage
from lakecore.timeline.instant import WRITE_ACTIONS, Instant, State, parse_file_name
from lakecore.timeline.metadata import CommitMetadata
from lakecore.timeline.timeline import Timeline

TIMELINE_DIR = ".weir/timeline"

_cache: OrderedDict[tuple[str, str], CommitMetadata] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_SIZE = 20_000


class TimelineStore:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def _path(self, name: str) -> str:
        return f"{TIMELINE_DIR}/{name}"

    def load(self) -> Timeline:
        found = (_parsed(name) for name in self.storage.list_names(TIMELINE_DIR))
        return Timeline.of(i for i in found if i is not None)

    def create_requested(self, instant: Instant, plan: bytes = b"") -> Instant:
        if instant.state is not State.REQUESTED:
            raise InvalidInstantState(f"{instant} must be requested to be created")
        self.storage.write_if_absent(self._path(instant.requested_file()), plan)
        return instant

    def transition_inflight(self, instant: Instant) -> Instant:
        if instant.state is not State.REQUESTED:
            raise InvalidInstantState(f"{instant} is not requested; only requested instants go inflight")
        inflight = Instant(instant.requested_time, instant.action, State.INFLIGHT)
        self.storage.write_if_absent(self._path(inflight.file_name), b"")
        return inflight

    def complete(self, instant: Instant, completion_time: str, metadata: CommitMetadata) -> Instant:
        if instant.state is not State.INFLIGHT:
            raise InvalidInstantState(f"{instant} is not inflight; only inflight instants complete")
        done = Instant(instant.requested_time, instant.action, State.COMPLETED, completion_time)
        try:
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
            raise CorruptMetadata(f"instant file {path} vanished while reading; retry the read") from None
        meta = CommitMetadata.loads(data, source=path)
        _remember(self.storage.uri, instant.file_name, meta)
        return meta

    def latest_schema(self, timeline: Timeline) -> list[dict[str, object]] | None:
        """The schema (JSON form) of the newest completed write that recorded one."""
        for instant in reversed(timeline.completed):
            if instant.action in WRITE_ACTIONS:
                schema = self.metadata(instant).schema
                if schema:
                    return schema
        return None

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
