"""The timeline as a value: every instant of a table, with the queries readers and writers ask.

Pure: built from a listing by `store.TimelineStore.load`; answers "what is completed as of T", "what
completed in (a, b]", "what is the newest time". Readers trust only completed instants.

`instants` are the active timeline's; `archived` carries what archival moved out (the manifest and the
files archived instants wrote that are still live), so views at or after the archived boundary build
from this value alone. Points inside the archived range need the history: `TimelineStore.as_of`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from lakecore.errors import InstantArchived, InstantNotFound, NeedsHistory
from lakecore.timeline.history import EMPTY, Archived
from lakecore.timeline.instant import Instant, State


@dataclass(frozen=True)
class Timeline:
    instants: tuple[Instant, ...]  # one per requested time, in its most advanced state
    archived: Archived = EMPTY

    @classmethod
    def of(cls, instants: Iterable[Instant], archived: Archived = EMPTY) -> Timeline:
        best: dict[str, Instant] = {}
        for i in instants:
            cur = best.get(i.requested_time)
            if cur is None or i.state > cur.state:
                best[i.requested_time] = i
        boundary = archived.boundary
        if boundary:  # an archival that crashed before deleting its instants' active files
            best = {t: i for t, i in best.items() if _active(i, boundary)}
        return cls(tuple(sorted(best.values(), key=lambda i: i.requested_time)), archived)

    @cached_property
    def completed(self) -> tuple[Instant, ...]:
        """Completed instants in completion order (the order their effects apply in)."""
        done = [i for i in self.instants if i.state is State.COMPLETED]
        return tuple(sorted(done, key=lambda i: (i.completion_time or "", i.requested_time)))

    @property
    def pending(self) -> tuple[Instant, ...]:
        return tuple(i for i in self.instants if i.state is not State.COMPLETED)

    def newest_time(self) -> str | None:
        """The largest requested or completion time on the timeline."""
        times = [i.requested_time for i in self.instants]
        times += [i.completion_time for i in self.instants if i.completion_time]
        if self.archived.boundary:
            times.append(self.archived.boundary)
        return max(times) if times else None

    def last_completed(self) -> Instant | None:
        return self.completed[-1] if self.completed else None

    def get(self, requested_time: str) -> Instant:
        for i in self.instants:
            if i.requested_time == requested_time:
                return i
        if self.archived.first and self.archived.manifest.first <= requested_time <= self.archived.boundary:
            raise InstantArchived(f"instant {requested_time} is in the archived timeline (archived up to "
                                  f"{self.archived.boundary}): it can still be read (time travel, "
                                  "incremental reads, `weir table timeline --archived`) but not rolled back, "
                                  "savepointed or restored to")
        raise InstantNotFound(f"no instant {requested_time} on the timeline; "
                              "list instants with `weir table timeline`")

    def find(self, requested_time: str) -> Instant | None:
        try:
            return self.get(requested_time)
        except InstantNotFound:
            return None

    def resolve_point(self, point: str) -> str:
        """A point in time as a completion-time bound. A completed instant's requested time means
        "as of that instant", i.e. its completion time; anything else is a wall-clock point."""
        i = self.find(point)
        if i is not None and i.completion_time:
            return i.completion_time
        return point

    def as_of(self, point: str) -> Timeline:
        """Only the instants completed at or before `point` (resolved with resolve_point)."""
        bound = self.resolve_point(point)
        pinned = self.archived.bound  # a timeline as of a point inside the archived range
        if bound < self.archived.boundary or (pinned is not None and bound != pinned):
            raise NeedsHistory(f"the table as of {point} is in its archived timeline (archived up to "
                               f"{self.archived.boundary}); read it through TimelineStore.as_of")
        return Timeline(tuple(i for i in self.instants
                              if i.state is State.COMPLETED and (i.completion_time or "") <= bound),
                        self.archived)

    def completed_between(self, start: str, end: str) -> tuple[Instant, ...]:
        """Completed instants with completion time in (start, end]."""
        return tuple(i for i in self.completed if start < (i.completion_time or "") <= end)

    def __len__(self) -> int:
        return len(self.instants)

    @property
    def total(self) -> int:
        """Instants on the active timeline plus the archived ones."""
        return len(self.instants) + self.archived.count


def _active(i: Instant, boundary: str) -> bool:
    """Not archived: archival takes completed instants up to the boundary, and no instant requested
    at or before the boundary was pending then (so a pending one there is an archival's leftover)."""
    if i.is_completed:
        return (i.completion_time or "") > boundary
    return i.requested_time > boundary
