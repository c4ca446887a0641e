"""What a supervisor's decision and scan do to the writers' status and Events: the status fragments the
sink writes (pure: values in, values out). `status.lastConflict` of both writers of a conflict
(`conflict_entries`, `with_conflict`; void when the loser committed first: `with_void_conflict`), a
writer's current instant and its lock timings (`with_current_instant`, `CurrentInstants`: which writers'
are due), the Events a decision posts (`conflict_events`), and whether a scan saw a commit (`CommitsSeen`).

Each `with_*` returns None when the status says so already, so an operator restart repeats nothing.
Must not: read or write anything (the sink does, supervision/sink.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from lakeoperator.supervision.supervisor import DECIDED_BY, Decision, TableKey, TableReport


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _iso_ms(epoch_ms: int) -> str:
    return _iso(datetime.fromtimestamp(epoch_ms / 1000, UTC))


def split_writer(writer: str | None) -> tuple[str, str] | None:
    """"namespace/name" -> (namespace, name); None for a writer the operator does not run."""
    if not writer or "/" not in writer:
        return None
    namespace, name = writer.split("/", 1)
    return namespace, name


def conflict_entries(decision: Decision) -> list[tuple[str | None, dict[str, Any]]]:
    """(writer, status.lastConflict entry) for the loser first, then the winner."""
    c = decision.conflict
    common: dict[str, Any] = {"decidedBy": DECIDED_BY, "at": _iso(decision.decided_at),
                              "fileGroups": [f"{p}/{f}" if p else f for p, f in sorted(c.file_groups)][:100]}
    if c.marker_at_ms:
        common["markerAt"] = _iso_ms(c.marker_at_ms)
    lost = {"role": "Lost", "instant": c.loser, "other": c.winner, "otherWriter": decision.winner_writer,
            "bytesWritten": decision.loser_bytes}
    won = {"role": "Won", "instant": c.winner, "other": c.loser, "otherWriter": decision.loser_writer}
    return [(w, {**common, **{k: v for k, v in e.items() if v is not None}})
            for w, e in ((decision.loser_writer, lost), (decision.winner_writer, won))]


def with_conflict(status: Mapping[str, Any], entry: Mapping[str, Any]) -> dict[str, Any] | None:
    """The status with `entry` as lastConflict (the loser's carries the submission that wrote the
    instant); None when it records this decision already (an operator restart decides nothing twice)."""
    current = status.get("lastConflict") or {}
    if all(current.get(k) == entry[k] for k in ("role", "instant", "other")):
        return None
    new = dict(entry)
    if status.get("submissionId"):
        new["submission"] = status["submissionId"]
    return {**status, "lastConflict": new}


def with_void_conflict(status: Mapping[str, Any], instant: str) -> dict[str, Any] | None:
    current = status.get("lastConflict") or {}
    if current.get("instant") != instant or current.get("void"):
        return None
    return {**status, "lastConflict": {**current, "void": True}}


CURRENT = ("currentInstant", "currentInstantStartedAt", "currentInstantLock")


def with_current_instant(status: Mapping[str, Any], instant: str | None,
                         info: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """status.currentInstant, when it started and how long drawing it waited for and held the table
    lock (from the writer's registry `info`); None when unchanged."""
    from lakecore.timeline.instant_time import to_epoch_ms

    new = {k: v for k, v in status.items() if k not in CURRENT}
    if instant is not None:
        new["currentInstant"] = instant
        new["currentInstantStartedAt"] = _iso_ms(to_epoch_ms(instant))
        lock = {"waitMs": (info or {}).get("lock_wait_ms"), "holdMs": (info or {}).get("lock_hold_ms")}
        if all(isinstance(v, int) for v in lock.values()):
            new["currentInstantLock"] = lock
    return None if new == dict(status) else new


def conflict_events(decision: Decision, applied: bool) -> list[tuple[str | None, str, str, str]]:
    """(writer, type, reason, message) of the Events a decision posts."""
    c = decision.conflict
    other = "a writer the operator does not run"
    if not applied:
        return [(decision.loser_writer, "Normal", "ConflictVoid",
                 f"{c.describe()}, but it committed before it could be aborted; the other write meets the "
                 "conflict at its commit")]
    return [(decision.loser_writer, "Warning", "ConflictLost",
             f"{c.describe()} ({decision.winner_writer or other}): aborted by the operator; the restart "
             "policy's onConflict decides what follows"),
            (decision.winner_writer, "Warning", "ConflictWon",
             f"write {c.winner} kept; the younger write {c.loser} ({decision.loser_writer or other}) was "
             "aborted")]


class CurrentInstants:
    """What each writer's status shows as its current instant, and which ones a scan changes (a writer
    that left a table's live writes goes back to none). Shared by the sinks."""

    def __init__(self) -> None:
        self._shown: dict[str, str | None] = {}
        self._table: dict[str, TableKey] = {}

    def changes(self, report: TableReport) -> list[tuple[str, str | None, Mapping[str, Any] | None]]:
        """(writer, its instant now or None, its registry info) for every writer whose status is due."""
        now: dict[str, str | None] = {w: write.instant for write in report.writes
                                      if (w := report.writers.get(write.instant))}
        for writer, instant in self._shown.items():
            if instant is not None and writer not in now and self._table.get(writer) == report.table.key:
                now[writer] = None
        out = []
        for writer, instant in now.items():
            self._table[writer] = report.table.key
            if self._shown.get(writer) != instant:
                out.append((writer, instant, report.infos.get(instant) if instant else None))
        return out

    def shown(self, writer: str, instant: str | None) -> None:
        """The writer's status now shows `instant`."""
        self._shown[writer] = instant


class CommitsSeen:
    """The latest completed instant each table's last scan saw, to tell a scan that sees a commit (the
    table's status and its services' triggers are due). Shared by the sinks."""

    def __init__(self) -> None:
        self._latest: dict[TableKey, str | None] = {}

    def new_commit(self, report: TableReport) -> bool:
        """Whether the table's latest completed instant changed since its last scan (every commit changes
        it: completion times only grow). Also at a table's first scan: a commit may have landed since
        its status was derived."""
        key = report.table.key
        seen = key in self._latest and self._latest[key] == report.last_completed
        self._latest[key] = report.last_completed
        return not seen


__all__ = [
    "CURRENT",
    "CommitsSeen",
    "CurrentInstants",
    "conflict_entries",
    "conflict_events",
    "split_writer",
    "with_conflict",
    "with_current_instant",
    "with_void_conflict",
]
