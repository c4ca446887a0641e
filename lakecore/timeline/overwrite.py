"""What a write that replaces file groups records on the timeline. Pure, but for the two helpers
at the end that read pending instants' requested files.

`insert_overwrite` replaces the partitions its input touches, `insert_overwrite_table` every
partition. Such a write is a `replacecommit`, like a clustering; the two are told apart by the body
of the requested file: a clustering's is its plan, an overwrite's is its scope
(`{"overwrite": {"operation": ..., "partitions": [...] | null}}`), written when the instant is drawn
(under the table lock), so table services scheduled while it runs can see what it will replace.
The completed instant's metadata carries the overwrite operation and the same scope in `extra`.

Must not decide anything about conflicts (concurrency.occ) or slices (layout.view): it only says
what an overwrite covers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lakecore.timeline.instant import Instant
from lakecore.timeline.metadata import CommitMetadata
from lakecore.timeline.store import TimelineStore
from lakecore.timeline.timeline import Timeline

OVERWRITE_OPERATIONS = frozenset({"insert_overwrite", "insert_overwrite_table"})
KEY = "overwrite"


@dataclass(frozen=True)
class OverwriteScope:
    """The partitions an overwrite replaces: every file group in them is replaced (by the input's
    rows, or by an empty base file). `partitions` None: the whole table."""

    operation: str
    partitions: frozenset[str] | None = None

    @classmethod
    def of(cls, operation: str, partitions: Iterable[str]) -> OverwriteScope:
        whole = operation == "insert_overwrite_table"
        return cls(operation, None if whole else frozenset(partitions))

    def covers(self, partition: str) -> bool:
        return self.partitions is None or partition in self.partitions

    def to_json(self) -> dict[str, Any]:
        return {"operation": self.operation,
                "partitions": None if self.partitions is None else sorted(self.partitions)}

    @classmethod
    def from_json(cls, d: Any) -> OverwriteScope | None:
        if not isinstance(d, dict) or d.get("operation") not in OVERWRITE_OPERATIONS:
            return None
        parts = d.get("partitions")
        return cls(str(d["operation"]), None if parts is None else frozenset(str(p) for p in parts))

    def dumps(self) -> bytes:
        """The requested file's body."""
        return json.dumps({KEY: self.to_json()}, separators=(",", ":")).encode()


def requested_scope(body: bytes) -> OverwriteScope | None:
    """The scope in a requested replacecommit's body; None for anything else (a clustering plan)."""
    try:
        obj = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return None
    return OverwriteScope.from_json(obj.get(KEY)) if isinstance(obj, dict) else None


def scope_of(meta: CommitMetadata) -> OverwriteScope | None:
    """The scope of a completed overwrite; None for every other instant."""
    if meta.operation not in OVERWRITE_OPERATIONS:
        return None
    return OverwriteScope.from_json(meta.extra.get(KEY)) or OverwriteScope(meta.operation)


def pending_overwrite(store: TimelineStore, instant: Instant) -> OverwriteScope | None:
    """The scope of a pending replacecommit that is an overwrite (None: a clustering, or gone)."""
    if instant.action != "replacecommit" or instant.is_completed:
        return None
    try:
        return requested_scope(store.read_plan(instant))
    except FileNotFoundError:  # rolled back meanwhile
        return None


def pending_overwrites(store: TimelineStore, timeline: Timeline) -> list[tuple[Instant, OverwriteScope]]:
    """Overwrites requested or inflight on the timeline, with their scopes."""
    return [(i, s) for i in timeline.pending if (s := pending_overwrite(store, i)) is not None]
