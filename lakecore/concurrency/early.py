"""Early conflict detection: find a conflicting writer before writing a file, not at commit.

Plugs into the write path as a `MarkerWriter`: before each data file's marker is created, look for
live, OLDER in-flight writers that already hold a marker in the same file group, and (optionally)
for writes that completed on that file group since ours started. Only older writers are checked,
so of two overlapping writers the younger always loses and they never abort each other.

Strategies (`EarlyDetection.strategy`):
- "direct": list the candidate writers' markers of this partition only (a race between two
  writers checking at the same moment is still caught at commit);
- "direct_zk": the same check and the marker creation inside a ZooKeeper lock keyed by
  partition/file group, which closes that race;
- "marker_service": the batched marker service checks asynchronously on a period (see
  write/marker_service.py); a found conflict makes the next marker request fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from lakecore.concurrency.occ import CHECKED_ACTIONS, completed_since
from lakecore.errors import EarlyConflict, InvalidTableConfig
from lakecore.storage import Storage, join
from lakecore.timeline import Instant, TimelineStore, now_ms
from lakecore.write import Marker, create_marker
from lakecore.write.heartbeat import HeartbeatConfig, is_expired, read_last_beat
from lakecore.write.markers import MARKERS_DIR

Strategy = Literal["direct", "direct_zk", "marker_service"]


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


def _holds(name: str, file_id: str) -> bool:
    return name.startswith((f"{file_id}_", f".{file_id}_"))


def marker_holders(storage: Storage, candidates: list[str], partition: str, file_id: str) -> list[str]:
    """Which of the candidate instants have a marker in (partition, file group)."""
    found = []
    for cand in candidates:
        directory = join(MARKERS_DIR, cand, partition)
        if any(_holds(f.path.rsplit("/", 1)[-1], file_id) for f in storage.list_dir(directory)):
            found.append(cand)
    return found


@dataclass
class EarlyConflictDetector:
    """A MarkerWriter that checks before creating. Pickles (Spark executors run it)."""

    ours: Instant
    detection: EarlyDetection
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)

    def create(self, storage: Storage, marker: Marker, partition: str, file_id: str) -> None:
        if self.detection.strategy == "direct_zk":
            from lakecore.concurrency.zookeeper import table_lock_key, zookeeper_lock

            assert self.detection.zookeeper
            key = f"{table_lock_key(storage.uri)}/{partition}/{file_id}"
            with zookeeper_lock(self.detection.zookeeper, key):
                self.check(storage, partition, file_id)
                create_marker(storage, marker)
            return
        self.check(storage, partition, file_id)
        create_marker(storage, marker)

    def check(self, storage: Storage, partition: str, file_id: str) -> None:
        timeline = TimelineStore(storage).load()
        older = [i.requested_time for i in timeline.pending
                 if i.requested_time < self.ours.requested_time and i.action in CHECKED_ACTIONS]
        now = now_ms()
        live = [t for t in older if not is_expired(read_last_beat(storage, t), now, self.heartbeat)]
        holders = marker_holders(storage, live, partition, file_id)
        if holders:
            raise self._conflict(holders[0], "is still writing", partition, file_id)
        if self.detection.check_commits:
            store = TimelineStore(storage)
            for other in completed_since(timeline, self.ours):
                if (partition, file_id) in store.metadata(other).file_groups:
                    raise self._conflict(other.requested_time, f"completed at {other.completion_time}",
                                         partition, file_id)

    def _conflict(self, other: str, state: str, partition: str, file_id: str) -> EarlyConflict:
        return EarlyConflict(
            f"early conflict: write {self.ours.requested_time} stopped before writing file group {file_id} "
            f"in {partition or '(unpartitioned)'}: the older write {other} {state} there. Ours is rolled "
            "back; retry it after that write commits, or give concurrent writers disjoint file groups",
            instant=self.ours.requested_time, other=other,
            file_groups=frozenset({(partition, file_id)}))

