"""Optimistic concurrency control: do two writes conflict? Pure.

Conflict = overlapping (partition, file group) sets between our write and a write that completed
after ours started (completion time > our requested time: every time of a table is one increasing
sequence, so that is exactly "completed while we were writing"). Disjoint file groups never
conflict. Under non-blocking concurrency, log appends never conflict (merge resolves their order by
event or completion time); only writes of base files (bulk insert into a file group) are checked.
A clustering (a replacecommit rewriting file slices as of its requested time) conflicts only with
writes of base files too: logs completing after it was planned join its new slice, as they join a
compaction's (which is no candidate at all).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lakecore.config import ConcurrencyMode
from lakecore.timeline import CommitMetadata, Instant, Timeline

FileGroup = tuple[str, str]  # (partition path, file id)
CHECKED_ACTIONS = frozenset({"commit", "deltacommit", "replacecommit"})
SLICE_REWRITES = frozenset({"clustering"})  # operations whose new base files take later logs


@dataclass(frozen=True)
class Conflict:
    ours: str                       # our instant time
    theirs: str                     # the other instant's time
    theirs_completed: str | None    # its completion time (None: pending, e.g. a planned compaction)
    file_groups: frozenset[FileGroup]

    def describe(self) -> str:
        groups = ", ".join(f"{fid} in {p or '(unpartitioned)'}" for p, fid in sorted(self.file_groups)[:5])
        more = f" and {len(self.file_groups) - 5} more" if len(self.file_groups) > 5 else ""
        state = f"completed at {self.theirs_completed}" if self.theirs_completed else "is pending"
        return f"instant {self.theirs} ({state}) also wrote file group(s) {groups}{more}"


def needs_check(mode: ConcurrencyMode, writes_base_files: bool) -> bool:
    if mode == "single_writer":
        return False
    if mode == "non_blocking":
        return writes_base_files
    return True


def completed_since(timeline: Timeline, ours: Instant) -> list[Instant]:
    """Write instants that completed after `ours` was requested (our concurrent competitors)."""
    return [i for i in timeline.completed
            if i.action in CHECKED_ACTIONS and i.requested_time != ours.requested_time
            and (i.completion_time or "") > ours.requested_time]


def find_conflicts(ours: Instant, our_groups: Iterable[FileGroup], candidates: Iterable[Instant],
                   metadata: Callable[[Instant], CommitMetadata],
                   only_base_writers: bool = False,
                   our_base_groups: Iterable[FileGroup] | None = None) -> list[Conflict]:
    """`our_base_groups`: the groups we wrote base files for (default: all of `our_groups`); only
    they are checked against a clustering (SLICE_REWRITES)."""
    mine = frozenset(our_groups)
    mine_bases = mine if our_base_groups is None else frozenset(our_base_groups)
    found = []
    for other in candidates:
        meta = metadata(other)
        stats = [s for s in meta.write_stats if s.kind == "base"] if only_base_writers else meta.write_stats
        checked = mine_bases if meta.operation in SLICE_REWRITES else mine
        overlap = checked & frozenset((s.partition, s.file_id) for s in stats)
        if overlap:
            found.append(Conflict(ours.requested_time, other.requested_time, other.completion_time, overlap))
    return found
