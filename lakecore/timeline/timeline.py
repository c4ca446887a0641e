"""The timeline as a value: every instant of a table, with the queries readers and writers ask.

Pure: built from a listing by `store.TimelineStore.load`; answers "what is completed as of T", "what
completed in (a, b]", "what is the newest time". Readers trust only completed instants.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from lakecore.errors import InstantNotFound
from lakecore.timeline.instant import Instant, State


@dataclass(frozen=True)
class Timeline:
    instants: tuple[Instant, ...]  # one per requested time, in its most advanced state

    @classmethod
    def of(cls, instants: Iterable[Instant]) -> Timeline:
        best: dict[str, Instant] = {}
        for i in instants:
            cur = best.get(i.requested_time)
            if cur is None or i.state > cur.state:
                best[i.requested_time] = i
        return cls(tuple(sorted(best.values(), key=lambda i: i.requested_time)))

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
        return max(times) if times else None

    def last_completed(self) -> Instant | None:
        return self.completed[-1] if self.completed else None

    def get(self, requested_time: str) -> Instant:
        for i in self.instants:
            if i.requested_time == requested_time:
                return i
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
        return Timeline(tuple(i for i in self.instants
                              if i.state is State.COMPLETED and (i.completion_time or "") <= bound))

    def completed_between(self, start: str, end: str) -> tuple[Instant, ...]:
        """Completed instants with completion time in (start, end]."""
        return tuple(i for i in self.completed if start < (i.completion_time or "") <= end)

    def __len__(self) -> int:
        return len(self.instants)
