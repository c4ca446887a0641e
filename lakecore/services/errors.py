"""Errors of the table services; all derive from `ServiceError` (itself a LakecoreError)."""

from __future__ import annotations

from lakecore.errors import LakecoreError


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


class WriterLive(ServiceError):
    """A pending write with a fresh heartbeat (or one that began meanwhile) blocks the operation."""


class RollbackBlocked(ServiceError):
    """A completed instant cannot be rolled back: a later write, compaction, savepoint or clean needs it."""
