"""The file-system view: which files make up each file group, sliced by completion time.

Built purely from completed instants' commit metadata and the live files of archived instants (never
from a directory listing), so files of
requested/inflight instants are invisible by construction. Slicing rule: a log file belongs to the
newest slice whose base instant is <= the log's completion time; logs completed before a file group's
first base form a base-less slice. Pending logs do not exist here at all.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field

from lakecore.layout.file_names import parse_data_file_name
from lakecore.timeline import CommitMetadata, Instant, Timeline, WriteStat


@dataclass(frozen=True)
class LogFile:
    stat: WriteStat
    instant_time: str
    completion_time: str


@dataclass(frozen=True)
class FileSlice:
    partition: str
    file_id: str
    base_instant: str | None        # None: a slice of log files with no base file yet
    base: WriteStat | None
    logs: tuple[LogFile, ...]       # in completion order

    @property
    def files(self) -> tuple[WriteStat, ...]:
        return ((self.base,) if self.base else ()) + tuple(lf.stat for lf in self.logs)


@dataclass
class _Group:
    bases: list[tuple[str, WriteStat]] = field(default_factory=list)   # (base instant, stat), sorted
    logs: list[LogFile] = field(default_factory=list)


@dataclass(frozen=True)
class FileSystemView:
    slices: tuple[FileSlice, ...]  # the latest slice of every file group, sorted by (partition, file_id)

    def partitions(self) -> list[str]:
        return sorted({s.partition for s in self.slices})

    def slice_of(self, partition: str, file_id: str) -> FileSlice | None:
        for s in self.slices:
            if s.partition == partition and s.file_id == file_id:
                return s
        return None

    def as_dict(self) -> dict[tuple[str, str], FileSlice]:
        return {(s.partition, s.file_id): s for s in self.slices}


def slice_logs(bases: list[str], logs: Iterable[LogFile]) -> dict[str | None, list[LogFile]]:
    """Assign each log to the newest base instant <= its completion time (None if there is none)."""
    ordered = sorted(bases)
    out: dict[str | None, list[LogFile]] = {}
    for lf in sorted(logs, key=_log_order):
        i = bisect.bisect_right(ordered, lf.completion_time)
        out.setdefault(ordered[i - 1] if i else None, []).append(lf)
    return out


def _log_order(lf: LogFile) -> tuple[str, str, int, str]:
    parsed = parse_data_file_name(lf.stat.file_name)
    return lf.completion_time, lf.instant_time, parsed.version if parsed else 0, lf.stat.file_name


def completed_files(timeline: Timeline, metadata: Callable[[Instant], CommitMetadata], *,
                    every_archived: bool = False) -> Iterator[tuple[WriteStat, str, str]]:
    """(stat, instant time, completion time) of every file written by a completed instant: files of
    archived instants first (those of the latest slices as of the archived boundary, which is all a
    view needs; with `every_archived` also superseded ones no clean deleted yet), then the active
    timeline's in completion order."""
    for af in (timeline.archived.every_file() if every_archived else timeline.archived.files):
        yield af.stat, af.instant_time, af.completion_time
    for inst in timeline.completed:
        for st in metadata(inst).write_stats:
            yield st, inst.requested_time, inst.completion_time or ""


def build_view(timeline: Timeline, metadata: Callable[[Instant], CommitMetadata], *,
               only: Collection[tuple[str, str]] | None = None) -> FileSystemView:
    """The view of `timeline`; with `only`, of those file groups (partition, file id) alone."""
    groups: dict[tuple[str, str], _Group] = {}
    for st, instant_time, completion_time in completed_files(timeline, metadata):
        key = (st.partition, st.file_id)
        if only is not None and key not in only:
            continue
        g = groups.setdefault(key, _Group())
        if st.kind == "base":
            g.bases.append((instant_time, st))
        else:
            g.logs.append(LogFile(st, instant_time, completion_time))
    slices = []
    for (partition, file_id), g in sorted(groups.items()):
        bases = dict(g.bases)
        by_base = slice_logs(list(bases), g.logs)
        latest = max(bases) if bases else None
        slices.append(FileSlice(partition, file_id, latest, bases.get(latest) if latest else None,
                                tuple(by_base.get(latest, ()))))
    return FileSystemView(tuple(slices))
