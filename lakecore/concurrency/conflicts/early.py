"""Early conflict detection: find a conflicting writer before writing a file, not at commit.

Plugs into the write path as a `MarkerWriter`: before each data file's marker is created, look for
live, OLDER in-flight writers that already hold a marker in the same file group, and (optionally)
for writes that completed on that file group since ours started. Only older writers are checked,
so of two overlapping writers the younger always loses and they never abort each other; and only
older writers that can still commit: one that a write completed into since it started will fail at
its commit, so the younger writer goes on (as the operator's supervisor decides, outside.py). A writer
is live while its heartbeat is fresh (a write that has not beaten yet counts from its start) and
nothing declared it dead: an instant a rollback claimed or whose writer aborted (its proof of death,
concurrency/liveness/heartbeat.py) is dead at once, so an aborted writer never blocks the others.

Strategies (`EarlyDetection.strategy`):
- "direct": list the candidate writers' markers of this partition only (two writers checking at
  the same moment can both pass; the commit check still catches them);
- "direct_zk": the same check and the marker creation inside a ZooKeeper lock keyed by
  table/partition/file group, which closes that race;
- "marker_service": the writer's batched marker service runs `async_checker` every `period_s`
  over all of the write's markers; a found conflict makes the next marker request fail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from lakecore.concurrency.conflicts.occ import CHECKED_ACTIONS, SLICE_REWRITES, completed_since
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig, is_alive
from lakecore.concurrency.rollback import TABLE_SERVICES, claimed_by_rollbacks
from lakecore.errors import EarlyConflict, InvalidTableConfig
from lakecore.layout import parse_data_file_name
from lakecore.storage import Storage, join
from lakecore.timeline import Instant, Timeline, TimelineStore, now_ms
from lakecore.write import Marker, create_marker, list_markers
from lakecore.write.markers import MARKERS_DIR

Strategy = Literal["direct", "direct_zk", "marker_service"]
FileGroup = tuple[str, str]


@dataclass(frozen=True)
class EarlyDetection:
    strategy: Strategy = "direct"
    check_commits: bool = True          # also look for writes completed since ours started
    zookeeper: str | None = None        # connect string, for "direct_zk"
    period_s: float = 0.2               # "marker_service": how often the asynchronous checker runs

    def __post_init__(self) -> None:
        if self.strategy not in ("direct", "direct_zk", "marker_service"):
            raise InvalidTableConfig(f"early conflict detection strategy {self.strategy!r} is unknown; use "
                                     "direct, direct_zk or marker_service")
        if self.strategy == "direct_zk" and not self.zookeeper:
            raise InvalidTableConfig("early conflict detection 'direct_zk' needs a ZooKeeper connect string")


@dataclass(frozen=True)
class Found:
    other: str          # the instant we conflict with
    state: str          # "is still writing" or "completed at ..."
    file_group: FileGroup
    checked_at: int = 0  # epoch ms of the liveness check (or timeline load) that found it


def file_group_of(data_path: str) -> FileGroup | None:
    """(partition, file id) of a data file path relative to the table base."""
    partition, _, name = data_path.rpartition("/")
    parsed = parse_data_file_name(name)
    return (partition, parsed.file_id) if parsed else None


def _holds(name: str, file_id: str) -> bool:
    return name.startswith((f"{file_id}_", f".{file_id}_"))


def live_older_writers(storage: Storage, timeline: Timeline, ours: Instant, heartbeat: HeartbeatConfig,
                       now: int, claimed: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Pending writes older than ours whose writer is alive; `claimed`: instants pending rollbacks
    claimed (dead whatever their heartbeat says)."""
    return [i.requested_time for i in timeline.pending
            if i.requested_time < ours.requested_time and i.action in CHECKED_ACTIONS
            and i.action not in TABLE_SERVICES  # a pending clustering is checked at its own commit
            and i.requested_time not in claimed
            and is_alive(storage, i.requested_time, now, heartbeat)]


def find_early_conflict(storage: Storage, ours: Instant, groups: set[FileGroup], heartbeat: HeartbeatConfig,
                        *, check_commits: bool, batched: bool = False) -> Found | None:
    """An older live writer holding a marker in one of `groups`, or a write completed on one of them
    since ours started. `batched`: read the candidates' markers with `list_markers` (MARKERS files
    too) instead of listing only the partition's direct marker directory."""
    store = TimelineStore(storage)
    timeline = store.load()
    rollbacks = any(i.action == "rollback" for i in timeline.pending)
    claimed = claimed_by_rollbacks(store, timeline) if rollbacks else set()
    now = now_ms()
    for cand in live_older_writers(storage, timeline, ours, heartbeat, now, claimed):
        hit, held = None, None
        if batched:
            held = _held(storage, cand)
            hit = next((g for g in sorted(groups) if g in held), None)
        else:
            for partition, file_id in sorted(groups):
                directory = join(MARKERS_DIR, cand, partition)
                if any(_holds(f.path.rsplit("/", 1)[-1], file_id) for f in storage.list_dir(directory)):
                    hit = (partition, file_id)
                    break
        if hit and not _doomed(store, timeline, cand, _held(storage, cand) if held is None else held):
            return Found(cand, "is still writing", hit, now)
    if check_commits:
        found = _completed_on(store, timeline, ours, groups)
        if found is not None:
            other, hit = found
            return Found(other.requested_time, f"completed at {other.completion_time}", hit, now)
    return None


def _completed_on(store: TimelineStore, timeline: Timeline, ours: Instant,
                  groups: set[FileGroup]) -> tuple[Instant, FileGroup] | None:
    """The first write completed since `ours` started on one of `groups`, and that group."""
    for other in completed_since(timeline, ours):
        meta = store.metadata(other)
        if meta.operation in SLICE_REWRITES:
            continue  # logs join a clustering's new slice; base writers are caught at commit
        hit = next((g for g in sorted(groups) if g in meta.file_groups), None)
        if hit:
            return other, hit
    return None


def _held(storage: Storage, instant_time: str) -> set[FileGroup]:
    """The file groups the instant's markers (direct and batched) name."""
    return {g for m in list_markers(storage, instant_time) if (g := file_group_of(m.data_path)) is not None}


def _doomed(store: TimelineStore, timeline: Timeline, cand: str, held: set[FileGroup]) -> bool:
    """An older live write holding our file group (`held`: all it holds) stops us only if it can
    still commit: one that a write completed into since it started fails at its commit, so stopping
    for it loses both writes. Asked only when it holds our group."""
    inst = timeline.find(cand)
    return inst is not None and bool(held) and _completed_on(store, timeline, inst, held) is not None


def early_conflict(ours: str, found: Found) -> EarlyConflict:
    partition, file_id = found.file_group
    return EarlyConflict(
        f"early conflict: write {ours} stopped before writing file group {file_id} in "
        f"{partition or '(unpartitioned)'}: the older write {found.other} {found.state} there. Ours is "
        "rolled back; retry it after that write commits, or give concurrent writers disjoint file groups",
        instant=ours, other=found.other, file_groups=frozenset({found.file_group}),
        detected_at=found.checked_at or None)


@dataclass
class EarlyConflictDetector:
    """A MarkerWriter that checks before creating ("direct", "direct_zk"). Pickles for executors."""

    ours: Instant
    detection: EarlyDetection
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)

    def create(self, storage: Storage, marker: Marker, partition: str, file_id: str) -> None:
        if self.detection.strategy == "direct_zk":
            from lakecore.concurrency.locks.zookeeper import zookeeper_lock
            from lakecore.concurrency.zookeeper import table_lock_key

            assert self.detection.zookeeper
            key = f"{table_lock_key(storage.uri)}/{partition}/{file_id}"
            with zookeeper_lock(self.detection.zookeeper, key):
                self.check(storage, partition, file_id)
                create_marker(storage, marker)
            return
        self.check(storage, partition, file_id)
        create_marker(storage, marker)

    def check(self, storage: Storage, partition: str, file_id: str) -> None:
        found = find_early_conflict(storage, self.ours, {(partition, file_id)}, self.heartbeat,
                                    check_commits=self.detection.check_commits)
        if found is not None:
            raise early_conflict(self.ours.requested_time, found)


def async_checker(storage: Storage, ours: Instant, detection: EarlyDetection, heartbeat: HeartbeatConfig,
                  found: list[Found]) -> Callable[[str, list[str]], str | None]:
    """The marker service's periodic check of our instant's markers; appends what it finds to `found`
    (so the driver can report the structured conflict) and returns the message that rejects us."""
    def check(instant_time: str, markers: list[str]) -> str | None:
        if instant_time != ours.requested_time:
            return None
        groups = {g for m in markers if (g := file_group_of(m.rpartition(".marker.")[0])) is not None}
        hit = find_early_conflict(storage, ours, groups, heartbeat,
                                  check_commits=detection.check_commits, batched=True)
        if hit is None:
            return None
        found.append(hit)
        return str(early_conflict(ours.requested_time, hit))
    return check
