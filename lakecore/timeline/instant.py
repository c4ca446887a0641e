"""Instants: what happened on a table, when it was requested and when it completed.

Owns the `Instant` value, its states and actions, and the file names that encode them:
`<T>.<action>.requested`, `<T>.<action>.inflight`, `<T>_<C>.<action>` (T requested time, C completion
time, both 17-digit UTC millisecond stamps). Pure: no I/O.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Literal, get_args

Action = Literal["commit", "deltacommit", "compaction", "clean", "rollback", "savepoint", "restore",
                 "replacecommit"]
ACTIONS: tuple[str, ...] = get_args(Action)
WRITE_ACTIONS = frozenset({"commit", "deltacommit", "compaction", "replacecommit"})


class State(enum.IntEnum):
    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


_TIME = r"\d{17}"
_REQUESTED = re.compile(rf"^({_TIME})\.([a-z]+)\.requested$")
_INFLIGHT = re.compile(rf"^({_TIME})\.([a-z]+)\.inflight$")
_COMPLETED = re.compile(rf"^({_TIME})_({_TIME})\.([a-z]+)$")


@dataclass(frozen=True, order=True)
class Instant:
    requested_time: str
    action: Action
    state: State = State.REQUESTED
    completion_time: str | None = None

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def file_name(self) -> str:
        if self.state is State.COMPLETED:
            return f"{self.requested_time}_{self.completion_time}.{self.action}"
        suffix = "requested" if self.state is State.REQUESTED else "inflight"
        return f"{self.requested_time}.{self.action}.{suffix}"

    def requested_file(self) -> str:
        return f"{self.requested_time}.{self.action}.requested"

    def inflight_file(self) -> str:
        return f"{self.requested_time}.{self.action}.inflight"

    def __str__(self) -> str:
        done = f"->{self.completion_time}" if self.completion_time else ""
        return f"{self.requested_time}{done} {self.action} ({self.state.name.lower()})"


def parse_file_name(name: str) -> Instant | None:
    """The instant a timeline file stands for; None for names that are not instants."""
    if m := _COMPLETED.match(name):
        t, c, action = m.groups()
        if action in ACTIONS:
            return Instant(t, action, State.COMPLETED, c)  # type: ignore[arg-type]
        return None
    for pattern, state in ((_REQUESTED, State.REQUESTED), (_INFLIGHT, State.INFLIGHT)):
        if m := pattern.match(name):
            t, action = m.groups()
            if action in ACTIONS:
                return Instant(t, action, state)  # type: ignore[arg-type]
    return None


def requested_time_of(value: Instant | str) -> str:
    """An instant's requested time, from the Instant (as the timeline and a write's result hand it out) or
    from the time itself (17 digits, as `weir table timeline` prints it)."""
    if isinstance(value, Instant):
        return value.requested_time
    if isinstance(value, str):
        return value
    raise TypeError(f"an instant is an Instant or its requested time (a str of 17 digits), not "
                    f"{type(value).__name__} {value!r}")
