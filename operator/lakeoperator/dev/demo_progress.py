"""What the demo prints while it runs: each resource's phase, each table's commits (operation, rows, by
which writer), each conflict decision and the writers' Events, and — through the long stretch where
Spark drivers start and write before anything commits — each writer's stage (its driver starting, its
write begun, the file groups it writes so far), with a line at least every HEARTBEAT_S saying who is
still at work and for how long.

`writer_stage` (pure) words a writer's stage from its status and what its table's markers show; the
`Progress` loop reads the state directory and the tables and prints what changed.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from lakecore import Table
from lakecore.timeline.metadata import writer_of as committed_writer
from lakeoperator.local import StateDir, rows

CONFLICT_EVENTS = ("ConflictLost", "ConflictWon", "ConflictVoid", "LoserStopped", "BackingOff")
HEARTBEAT_S = 10.0     # never longer than this without a line while something runs
MARKERS_EVERY_S = 1.0  # how often a live write's markers are counted


def writer_of(extra: Any) -> str:
    """Who made a commit (lakecore's reading of its extra fields); services name no writer."""
    return committed_writer(extra or {}) or "a table service"


def describe_conflict(name: str, c: Mapping[str, Any]) -> str:
    groups = ", ".join(f"{g}" for g in c.get("fileGroups") or [])
    by = f" by {c['otherWriter']}" if c.get("otherWriter") else " (completed)"
    return (f"loser {name} (write {c.get('instant')}, submission {c.get('submission')}, "
            f"{c.get('bytesWritten', 0):,} bytes written) — winner write {c.get('other')}{by}; "
            f"file groups {groups}; decided by {c.get('decidedBy')}")


def writer_stage(status: Mapping[str, Any], file_groups: int | None,
                 last_write: tuple[str, bool] | None = None) -> str | None:
    """A running writer's stage in words (None: it runs no driver now). `file_groups`: how many file
    groups its current write's markers name (None: not counted); `last_write`: the instant this
    submission wrote last and whether it committed (a stream between micro-batches, a stopped write)."""
    if status.get("phase") not in ("Submitted", "Running"):
        return None
    instant = status.get("currentInstant")
    if instant is None:
        if status.get("phase") == "Submitted":
            return "driver submitted"
        if last_write is None:
            return "Spark driver starting (JVM, Spark session, reading its input)"
        last, committed = last_write
        return f"committed {last}; its driver looks for more input or ends" if committed else \
            f"write {last} ended without a commit; its driver stops"
    if not file_groups:
        return f"write {instant} begun: reading and routing its input"
    return f"writing {instant}: {file_groups} file group{'s' if file_groups > 1 else ''} so far"


def short(stage: str) -> str:
    """A stage's first words, for the line that lists who is at work."""
    return stage.split(" (")[0].split(":")[0].split(";")[0]


@dataclass
class Progress:
    """Prints what changes (see the module docstring)."""

    console: Console
    state: StateDir
    tables: dict[str, str] = field(default_factory=dict)           # LakeTable name -> location
    _phases: dict[tuple[str, str], str] = field(default_factory=dict)
    _commits: dict[str, int] = field(default_factory=dict)
    _conflicts: dict[str, str] = field(default_factory=dict)
    _events: dict[str, int] = field(default_factory=dict)
    _stages: dict[str, str] = field(default_factory=dict)
    _writes: dict[str, tuple[str, str]] = field(default_factory=dict)   # writer -> (submission, instant)
    _committed: set[str] = field(default_factory=set)
    _groups: dict[str, tuple[float, int]] = field(default_factory=dict)   # instant -> (counted at, groups)
    started: float = field(default_factory=time.monotonic)
    last_said: float = field(default_factory=time.monotonic)

    def say(self, text: str) -> None:
        self.last_said = time.monotonic()
        self.console.print(f"[dim]{self.last_said - self.started:6.1f}s[/dim] {text}")

    def update(self) -> None:
        for row in rows(self.state):
            key = (row["kind"], row["name"])
            detail = "" if row["kind"] == "LakeTable" else row["detail"]   # its commits are shown below
            line = f"{row['phase']} {detail}".rstrip()
            if self._phases.get(key) != line:
                self._phases[key] = line
                self.say(f"{row['kind']}/[bold]{row['name']}[/bold]: {line}")
        for name, location in self.tables.items():
            self._new_commits(name, location)
        at_work: dict[str, list[str]] = {}
        for r in self.state.all("LakeWriter"):
            stage = self._follow_writer(r.key[2], r.body.get("status") or {}, r.events or [],
                                        ((r.body.get("spec") or {}).get("tableRef") or {}).get("name"))
            if stage is not None:
                at_work.setdefault(short(stage), []).append(r.key[2])
        if at_work and time.monotonic() - self.last_said >= HEARTBEAT_S:
            who = "; ".join(f"{', '.join(names)}: {stage}" for stage, names in at_work.items())
            self.say(f"  [dim]still at work: {who}[/dim]")

    def _follow_writer(self, name: str, status: Mapping[str, Any], events: list[dict[str, Any]],
                       table: str | None) -> str | None:
        """Say what is new of one writer (a conflict it lost, its Events, its stage); its stage."""
        conflict = status.get("lastConflict") or {}
        if conflict.get("role") == "Lost" and self._conflicts.get(name) != conflict.get("instant"):
            self._conflicts[name] = str(conflict.get("instant"))
            self.say("[bold red]conflict decided from outside[/bold red]: "
                     f"{describe_conflict(name, conflict)}")
        for e in events[self._events.get(name, 0):]:
            if e["reason"] in CONFLICT_EVENTS or e["type"] == "Warning":
                self.say(f"  event {name}: [yellow]{e['reason']}[/yellow] {e['message']}")
        self._events[name] = len(events)
        submission, instant = str(status.get("submissionId")), status.get("currentInstant")
        if instant:
            self._writes[name] = (submission, str(instant))
        last = self._writes.get(name)
        last_write = (last[1], last[1] in self._committed) if last and last[0] == submission else None
        stage = writer_stage(status, self._file_groups(self.tables.get(str(table)), instant), last_write)
        if stage is not None and self._stages.get(name) != stage:
            self.say(f"  {name}: {stage}")
        self._stages[name] = stage or ""
        return stage

    def _file_groups(self, location: str | None, instant: str | None) -> int | None:
        """The file groups the write's markers name, counted at most every MARKERS_EVERY_S."""
        if location is None or instant is None:
            return None
        counted = self._groups.get(instant)
        if counted is not None and time.monotonic() - counted[0] < MARKERS_EVERY_S:
            return counted[1]
        from lakecore.concurrency.conflicts.outside import held_groups
        from lakecore.storage import open_storage

        try:
            groups = len(held_groups(open_storage(location), instant))
        except OSError:
            groups = counted[1] if counted else 0
        self._groups[instant] = (time.monotonic(), groups)
        return groups

    def _new_commits(self, name: str, location: str) -> None:
        try:
            table = Table.open(location)
            completed = table.timeline().completed
        except Exception:  # not created yet
            return
        for inst in completed[self._commits.get(name, 0):]:
            self._committed.add(inst.requested_time)
            meta = table.commit_metadata(inst)
            self.say(f"  {name}: {inst.action} {inst.requested_time} [green]committed[/green] "
                     f"{meta.operation}{f', {meta.counts.describe()}' if meta.write_stats else ''}, by "
                     f"{writer_of(meta.extra)}")
        self._commits[name] = len(completed)

