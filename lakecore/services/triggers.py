"""When to run a table service inline, right after a write commits. Pure.

A trigger fires on the number of delta commits since the service last completed, on the time since
then, or on either/both — Hudi's NUM_COMMITS, TIME_ELAPSED, NUM_OR_TIME, NUM_AND_TIME.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lakecore.errors import InvalidTableConfig
from lakecore.timeline import Timeline
from lakecore.timeline.instant_time import to_epoch_ms

TriggerMode = Literal["commits", "time", "either", "both"]


@dataclass(frozen=True)
class Trigger:
    mode: TriggerMode = "commits"
    max_delta_commits: int = 5
    max_seconds: float = 3600.0

    def __post_init__(self) -> None:
        if self.mode not in ("commits", "time", "either", "both"):
            raise InvalidTableConfig(f"trigger mode {self.mode!r}: use commits, time, either or both")
        if self.max_delta_commits < 1 or self.max_seconds <= 0:
            raise InvalidTableConfig("trigger thresholds must be >= 1 commit and > 0 seconds")


def due(trigger: Trigger, timeline: Timeline, action: str, now_ms: int) -> bool:
    """Whether the service whose instants have `action` is due, given the completed timeline."""
    completed = timeline.completed
    last = next((i for i in reversed(completed) if i.action == action), None)
    since = last.completion_time if last and last.completion_time else ""
    commits = sum(1 for i in completed if i.action in ("deltacommit", "commit")
                  and (i.completion_time or "") > since)
    if last is None:  # never ran: time counts from the first write
        first = next((i for i in completed if i.action in ("deltacommit", "commit")), None)
        start = to_epoch_ms(first.completion_time) if first and first.completion_time else now_ms
    else:
        start = to_epoch_ms(since)
    by_commits = commits >= trigger.max_delta_commits
    by_time = commits > 0 and now_ms - start >= trigger.max_seconds * 1000
    return {"commits": by_commits, "time": by_time, "either": by_commits or by_time,
            "both": by_commits and by_time}[trigger.mode]
