"""What to clean: retention policies, every file slice of a table, and the clean plan. Pure.

Files are only ever referenced by completed instants' write stats, so the files of the table are
exactly the files of `all_slices(...)`. A file is kept when any retained read needs it: the latest
view (always), plus, for the time-travel policies, the view as of every retained point in time —
built by the same `build_view` the readers use, so "kept" means "that read works", including logs
that completion-time slicing puts into an older slice as of a past point than in the full history.
Files a live savepoint needs (`savepoint.savepointed_files`) are always kept, and so are the files of
the view as of every point a retained published snapshot shows (`published`: what Iceberg and Delta
readers may still open, `services.published`). Every other file is
garbage and is listed, per file slice, in the plan (minus what completed cleans already deleted).

Retained points: `keep_latest_commits` N: the completion of the N-th newest completed data write
(commit/deltacommit, or a replacecommit that is an overwrite) and every instant completed after it,
so time travel to any point from that write on works; `keep_by_hours` H: the cutoff `now - H` (the
view of the newest instant completed by then) and every instant completed after it;
`keep_latest_file_versions` N: none — only the newest N slices per file group are kept, whatever
time travel needed them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from lakecore.errors import CorruptMetadata, InvalidTableConfig
from lakecore.layout import FileSlice, FileSystemView, build_view, completed_files
from lakecore.layout.view import LogFile, slice_logs
from lakecore.services.savepoint import savepointed_files
from lakecore.timeline import CommitMetadata, Instant, Timeline, WriteStat, scope_of
from lakecore.timeline.instant_time import format_ms

PolicyKind = Literal["keep_latest_commits", "keep_latest_file_versions", "keep_by_hours"]
DATA_WRITES = frozenset({"commit", "deltacommit"})
_DEFAULTS: dict[str, int] = {"keep_latest_commits": 10, "keep_latest_file_versions": 3, "keep_by_hours": 24}


@dataclass(frozen=True)
class CleanPolicy:
    """What to retain. `retained` is N commits, N file versions or H hours (per `kind`); None means
    the default: 10 commits, 3 file versions, 24 hours."""

    kind: PolicyKind = "keep_latest_commits"
    retained: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in _DEFAULTS:
            raise InvalidTableConfig(f"unknown clean policy {self.kind!r}; use one of {sorted(_DEFAULTS)}")
        n = self.retained
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise InvalidTableConfig(f"clean policy {self.kind} needs retained >= 1, got {n!r}")

    @property
    def n(self) -> int:
        return self.retained if self.retained is not None else _DEFAULTS[self.kind]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "retained": self.n}


@dataclass(frozen=True)
class CleanOperation:
    """The files of one file slice to delete (paths relative to the table base)."""

    partition: str
    file_id: str
    base_instant: str | None
    files: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "file_id": self.file_id, "base_instant": self.base_instant,
                "files": list(self.files)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CleanOperation:
        base = d.get("base_instant")
        return cls(str(d["partition"]), str(d["file_id"]), None if base is None else str(base),
                   tuple(str(f) for f in d["files"]))


@dataclass(frozen=True)
class CleanPlan:
    instant_time: str                        # the clean's requested time ("" for a dry run)
    policy: CleanPolicy
    operations: tuple[CleanOperation, ...]   # sorted by (partition, file id, base instant)
    earliest_retained: str | None = None     # oldest point time travel still works for (None: latest only)
    rollbacks: tuple[str, ...] = ()          # pending writes with expired heartbeats, rolled back first

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(sorted(f for op in self.operations for f in op.files))

    def record(self) -> dict[str, Any]:
        """What the completed clean records (its commit metadata's extra)."""
        return {"deleted": list(self.files), "policy": self.policy.to_json(),
                "earliest_retained": self.earliest_retained, "rolled_back": list(self.rollbacks)}

    def dumps(self) -> bytes:
        return json.dumps({"instant_time": self.instant_time, "policy": self.policy.to_json(),
                           "earliest_retained": self.earliest_retained, "rollbacks": list(self.rollbacks),
                           "operations": [o.to_json() for o in self.operations]},
                          separators=(",", ":")).encode()

    @classmethod
    def loads(cls, data: bytes, *, source: str = "clean plan") -> CleanPlan:
        try:
            obj = json.loads(data)
            pol = obj["policy"]
            return cls(str(obj["instant_time"]), CleanPolicy(pol["kind"], int(pol["retained"])),
                       tuple(CleanOperation.from_json(o) for o in obj["operations"]),
                       obj.get("earliest_retained"), tuple(str(r) for r in obj.get("rollbacks", ())))
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError,
                AttributeError, InvalidTableConfig) as exc:
            raise CorruptMetadata(f"{source} is truncated or corrupted ({exc!r}); run `weir table repair "
                                  "TABLE --run` to quarantine the pending clean, then run the clean again "
                                  "(cleaning is idempotent)") from exc


def all_slices(timeline: Timeline, metadata: Callable[[Instant], CommitMetadata]) -> tuple[FileSlice, ...]:
    """Every file slice of every file group (not just the latest), sorted by (partition, file id,
    base instant; the base-less slice first), from the completed instants' write stats."""
    bases: dict[tuple[str, str], dict[str, WriteStat]] = {}
    logs: dict[tuple[str, str], list[LogFile]] = {}
    for st, instant_time, completion_time in completed_files(timeline, metadata, every_archived=True):
        key = (st.partition, st.file_id)
        if st.kind == "base":
            bases.setdefault(key, {})[instant_time] = st
        else:
            logs.setdefault(key, []).append(LogFile(st, instant_time, completion_time))
    out = []
    for key in sorted(set(bases) | set(logs)):
        group_bases = bases.get(key, {})
        by_base = slice_logs(list(group_bases), logs.get(key, ()))
        if None in by_base:
            out.append(FileSlice(*key, None, None, tuple(by_base[None])))
        out.extend(FileSlice(*key, b, group_bases[b], tuple(by_base.get(b, ()))) for b in sorted(group_bases))
    return tuple(out)


def retained_points(timeline: Timeline, policy: CleanPolicy, now_ms: int,
                    metadata: Callable[[Instant], CommitMetadata] | None = None) -> list[str]:
    """The completion-time bounds whose views must stay readable (besides the latest view).
    `metadata`: to count overwrites (replacecommits of writes) as data writes, as they are."""
    completed = timeline.completed
    if policy.kind == "keep_latest_file_versions":
        return []
    if policy.kind == "keep_latest_commits":
        writes = [i for i in completed if i.action in DATA_WRITES or (
            metadata is not None and i.action == "replacecommit" and scope_of(metadata(i)) is not None)]
        if len(writes) < policy.n and timeline.archived.count:
            return [""]  # the N-th newest write may be archived: retain every archived file
        if not writes:
            return []
        start = writes[-policy.n] if len(writes) >= policy.n else writes[0]
        cutoff = start.completion_time or ""
        points = [cutoff]
    else:
        cutoff = format_ms(max(now_ms - policy.n * 3_600_000, 0))
        points = [cutoff]
    # A view changes only when an instant completes, so these bounds cover every point >= cutoff.
    points += [i.completion_time or "" for i in completed if (i.completion_time or "") > cutoff]
    return points


def cleaned(timeline: Timeline, metadata: Callable[[Instant], CommitMetadata]) -> set[str]:
    """Files completed cleans already deleted (their write stats still name them)."""
    return {str(p) for i in timeline.completed if i.action == "clean"
            for p in metadata(i).extra.get("deleted", ())}


def _paths(view: FileSystemView) -> set[str]:
    return {f.path for s in view.slices for f in s.files}


def plan_clean(timeline: Timeline, metadata: Callable[[Instant], CommitMetadata], policy: CleanPolicy,
               now_ms: int, *, expired: Iterable[str] = (), in_use: Iterable[str] = (),
               published: Iterable[str] = (), instant_time: str = "") -> CleanPlan:
    """The files no retained read needs, per file slice. `expired`: pending writes whose heartbeat
    expired (to roll back); `in_use`: paths pending table services still read (never deleted);
    `published`: completion times retained published snapshots show (their views are kept)."""
    slices = all_slices(timeline, metadata)
    keep = _paths(build_view(timeline, metadata)) | set(in_use) | cleaned(timeline, metadata)
    keep |= savepointed_files(timeline, metadata)
    points = retained_points(timeline, policy, now_ms, metadata)
    boundary = timeline.archived.boundary
    for point in [*points, *published]:
        if point < boundary:  # a view inside the archived range: keep every archived file (safe side)
            keep |= {af.stat.path for af in timeline.archived.every_file()}
            continue
        keep |= _paths(build_view(timeline.as_of(point), metadata))
    if policy.kind == "keep_latest_file_versions":
        by_group: dict[tuple[str, str], list[FileSlice]] = {}
        for s in slices:
            by_group.setdefault((s.partition, s.file_id), []).append(s)
        for group in by_group.values():
            keep |= {f.path for s in group[-policy.n:] for f in s.files}
    ops = []
    for s in slices:
        doomed = tuple(sorted(f.path for f in s.files if f.path not in keep))
        if doomed:
            ops.append(CleanOperation(s.partition, s.file_id, s.base_instant, doomed))
    earliest = (points[0] or None) if points and policy.kind != "keep_latest_file_versions" else None
    return CleanPlan(instant_time, policy, tuple(ops), earliest, tuple(sorted(expired)))
