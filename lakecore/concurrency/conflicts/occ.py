"""Optimistic concurrency control: do two writes conflict? Pure.

Conflict = overlapping (partition, file group) sets between our write and a write that completed
after ours started (completion time > our requested time: every time of a table is one increasing
sequence, so that is exactly "completed while we were writing"). Disjoint file groups never
conflict. Under non-blocking concurrency, log appends never conflict (merge resolves their order by
event or completion time); only writes of base files (bulk insert into a file group) are checked.
A clustering (a replacecommit rewriting file slices as of its requested time) conflicts only with
writes of base files too: logs completing after it was planned join its new slice, as they join a
compaction's (which is no candidate at all).

Overwrites (insert_overwrite, insert_overwrite_table: replacecommits with a scope of partitions)
replace every file group of their scope, so they conflict by partition, not by file group, and in
both modes, log appends included: a write that completed into the scope while the overwrite ran
would otherwise survive it (its log joins the overwrite's new slice), and one that started before
the overwrite completed and commits after it would land on rows it never saw. The overwrite is the
loser in the first case, the other write in the second. Table services are kept out of a pending
overwrite's scope when they plan (transaction.view_for_services); a compaction or clustering
requested after the overwrite and completed before it is a conflict too, as a safety net.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lakecore.config import ConcurrencyMode
from lakecore.timeline import CommitMetadata, Instant, OverwriteScope, Timeline, scope_of

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
                   our_base_groups: Iterable[FileGroup] | None = None,
                   only_overwrites: bool = False,
                   overwritable: Iterable[FileGroup] | None = None) -> list[Conflict]:
    """`our_base_groups`: the groups we wrote base files for (default: all of `our_groups`); only
    they are checked against a clustering (SLICE_REWRITES). An overwrite among the candidates
    conflicts with every group of ours in its scope (`overwritable`, default `our_groups`: every
    group we wrote, logs too); `only_overwrites`: check nothing else (a non-blocking log append)."""
    mine = frozenset(our_groups)
    mine_bases = mine if our_base_groups is None else frozenset(our_base_groups)
    replaceable = mine if overwritable is None else frozenset(overwritable)
    found = []
    for other in candidates:
        meta = metadata(other)
        scope = scope_of(meta)
        if scope is not None:
            overlap = in_scope(replaceable, scope)
        elif only_overwrites:
            continue
        else:
            stats = [s for s in meta.write_stats if s.kind == "base" or not only_base_writers]
            checked = mine_bases if meta.operation in SLICE_REWRITES else mine
            overlap = checked & frozenset((s.partition, s.file_id) for s in stats)
        if overlap:
            found.append(Conflict(ours.requested_time, other.requested_time, other.completion_time, overlap))
    return found


def in_scope(groups: Iterable[FileGroup], scope: OverwriteScope) -> frozenset[FileGroup]:
    return frozenset(g for g in groups if scope.covers(g[0]))


def overwrite_conflicts(ours: Instant, scope: OverwriteScope, candidates: Iterable[Instant],
                        metadata: Callable[[Instant], CommitMetadata]) -> list[Conflict]:
    """Our overwrite against writes completed since it started: any file they wrote in our scope is
    a conflict (base or log, either mode). A compaction or clustering requested before us rewrote an
    older slice than the one we replace, so it is none; one requested after us would supersede ours."""
    found = []
    for other in candidates:
        meta = metadata(other)
        service = other.action == "compaction" or meta.operation in SLICE_REWRITES
        if service and other.requested_time < ours.requested_time:
            continue
        overlap = in_scope(meta.file_groups, scope)
        if overlap:
            found.append(Conflict(ours.requested_time, other.requested_time, other.completion_time, overlap))
    return found
