"""Errors of the table services; all derive from `ServiceError` (itself a LakecoreError)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakecore.errors import InvalidInput, LakecoreError, ServiceRunning, WriteConflict, WriterLive

__all__ = ["CleanPending", "ClusteringConflict", "ClusteringPending", "CompactionPending", "FilesCleaned",
           "InvalidClusteringStrategy", "NotMergeOnRead", "RollbackBlocked", "SavepointNotFound",
           "ServiceError", "ServiceRunning", "WriterLive"]


class ServiceError(LakecoreError):
    """A table service could not be scheduled or run."""


class CompactionPending(ServiceError):
    """Another compaction is already scheduled or running on the table (one at a time)."""


class NotMergeOnRead(ServiceError):
    """Compaction applies to merge-on-read tables only."""


class FilesCleaned(ServiceError):
    """A time-travel read needs files that a clean deleted (the point is older than the retention)."""


class CleanPending(ServiceError):
    """A clean planned without the requested change is pending; finish it first."""


class SavepointNotFound(ServiceError):
    """No live savepoint has the given instant time."""


class RollbackBlocked(ServiceError):
    """A completed instant cannot be rolled back: a later write, compaction, savepoint or clean needs it."""


class ClusteringPending(ServiceError):
    """Another clustering is already scheduled or running on the table (one at a time)."""


class InvalidClusteringStrategy(ServiceError, InvalidInput):
    """A clustering strategy names an unknown kind, an unknown/unsortable column, or a bad bound."""


class ClusteringConflict(ServiceError, WriteConflict):
    """A write completed after the clustering was planned rewrote a base file of one of its file groups;
    the clustering was rolled back (the write's data stays)."""

    @classmethod
    def of(cls, instant: str, conflicts: Sequence[Any]) -> ClusteringConflict:
        detail = "; ".join(c.describe() for c in conflicts)
        return cls(f"clustering {instant} conflicts with concurrent writes: {detail} after it was planned. "
                   "The clustering was rolled back and the table reads as the writes left it: schedule a "
                   "new clustering (it will plan over the new base files)", instant=instant,
                   conflicts=tuple(conflicts))
