"""Every error lakecore raises, in one module, each exported by the package root (`lakecore`).

One root (`LakecoreError`); leaf classes carry a one-line docstring. Messages say what happened and
end with what to do. `retryable` marks errors a caller may retry as-is (the Spark jobs map it to exit
codes, the operator to kopf's TemporaryError). Every error pickles with its message and attributes
(tasks in other processes raise them to their driver). Nothing here imports anything but the standard
library. Sections: table and configuration, bad input data, timeline and storage, concurrency (locks,
conflicts, liveness), table services, the merge engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class LakecoreError(Exception):
    """Root of every lakecore error."""

    retryable: bool = False


# -- table and configuration -------------------------------------------------------------------


class TableNotFound(LakecoreError):
    """No table exists at the URI."""


class TableAlreadyExists(LakecoreError):
    """A table already exists at the URI given to create()."""


class InvalidTableConfig(LakecoreError):
    """The table configuration is inconsistent or incomplete."""


class InvalidStorageOptions(InvalidTableConfig):
    """The storage options, or the environment variable or file they are read from, are missing or
    malformed."""


class ZooKeeperAccessDenied(InvalidTableConfig):
    """ZooKeeper refused this process's credentials (WEIR_ZOOKEEPER_USERNAME/PASSWORD) on a node's ACL."""

    def __init__(self, message: str, *, path: str = "", user: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.user = user  # None: the process had no ZooKeeper credentials

    def __reduce__(self) -> tuple[Any, ...]:  # survives pickling from executors to the driver
        return (_rebuild_access_denied, (str(self), self.path, self.user))


def _rebuild_access_denied(message: str, path: str, user: str | None) -> ZooKeeperAccessDenied:
    return ZooKeeperAccessDenied(message, path=path, user=user)


class CorruptMetadata(LakecoreError):
    """A metadata file (table config, instant, plan) is truncated or unreadable."""


class CorruptTimeline(CorruptMetadata):
    """An instant file or the history manifest does not parse; writers refuse the table until
    `weir table repair` fixes it."""


class UnsupportedTableVersion(LakecoreError):
    """The table was written by a newer format version than this lakecore reads."""


class DamagedFile(LakecoreError):
    """A data file's bytes cannot be read (truncated, garbled footer or pages): retrying does not help."""

    def __init__(self, message: str, *, path: str = "", instant: str | None = None) -> None:
        super().__init__(message)
        self.path = path        # relative to the table base
        self.instant = instant  # the instant that wrote it (from its name), when the name says

    def __reduce__(self) -> tuple[Any, ...]:  # survives pickling from executors to the driver
        return (_rebuild_damaged, (str(self), self.path, self.instant))


def _rebuild_damaged(message: str, path: str, instant: str | None) -> DamagedFile:
    return DamagedFile(message, path=path, instant=instant)


# -- bad input data ----------------------------------------------------------------------------


class InvalidInput(LakecoreError):
    """The data given to a write does not fit the table."""


class SchemaMismatch(InvalidInput):
    """Input columns or types do not match the table schema."""


class MissingColumn(InvalidInput):
    """A required column (record key, ordering field, partition field) is missing from the input."""


class NullKey(InvalidInput):
    """Record-key or partition values are null."""


class UnsupportedType(InvalidInput):
    """An Arrow type lakecore cannot store."""


class UnknownOperation(InvalidInput):
    """A write was asked for an operation lakecore does not have."""


# -- timeline and storage ----------------------------------------------------------------------


class StorageError(LakecoreError):
    """The storage backend failed an operation."""

    retryable = True


class StorageFull(StorageError):
    """The storage refused a write for want of space (ENOSPC) or quota (EDQUOT); nothing of it is visible."""


class StorageAccessDenied(StorageError):
    """The storage refused this process an operation (permissions, a read-only file system)."""

    retryable = False


class AlreadyExists(StorageError):
    """A create-if-absent write found the object already there."""

    retryable = False


class MarkerServiceError(StorageError):
    """The marker service was unreachable, stopping, or could not make a marker durable."""


class AtomicCreateUnsupported(StorageError):
    """The storage cannot create a file atomically only-if-absent."""

    retryable = False


class HistoryMoved(CorruptMetadata):
    """A history file named by the manifest vanished (an LSM merge replaced it): reload and retry."""

    retryable = True

    def __init__(self, path: str) -> None:
        super().__init__(f"history file {path} vanished while reading (a concurrent archival merged it); "
                         "retry the read")
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:  # the message is built from the path: rebuild it from that
        return (HistoryMoved, (self.path,))


class InstantNotFound(LakecoreError):
    """No instant on the timeline matches the given time."""


class BeforeFirstCommit(InstantNotFound):
    """A time-travel point is before the table's first commit (or the table has none); the message
    names the earliest time that can be read."""

    def __init__(self, message: str, *, earliest: str | None = None) -> None:
        super().__init__(message)
        self.earliest = earliest  # the earliest readable point, an instant time (None: no commit yet)


class InstantArchived(InstantNotFound):
    """The instant was moved to the archived timeline; it can be read but no longer acted on."""


class NeedsHistory(LakecoreError):
    """A question about a point in the archived timeline was asked of the active timeline alone."""


class InvalidInstantState(LakecoreError):
    """An instant is not in the state an operation needs (e.g. committing a completed instant)."""


# -- concurrency -------------------------------------------------------------------------------


class LockError(LakecoreError):
    """The table lock could not be acquired or was lost."""

    retryable = True


class LockTimeout(LockError):
    """The table lock was not acquired within the timeout."""


class LockAlreadyHeld(LockError):
    """The calling thread already holds this lock; locks are not reentrant."""

    retryable = False


class LockUnavailable(LockError):
    """The lock service cannot be reached, or the session holding the lock was lost."""


class LockUnsupported(LockError):
    """The configured lock provider cannot work on this table's storage."""

    retryable = False


class LockProviderMismatch(LockError):
    """A writer asked for another lock than the one the table records in table.json."""

    retryable = False


class LockProviderChanged(LockError):
    """The table's lock provider was changed while this writer had the table open."""

    retryable = False


class WriteAborted(LakecoreError):
    """A write was abandoned before commit; nothing of it is visible."""


class WriterLive(LakecoreError):
    """A pending write with a fresh heartbeat (or one that began meanwhile) blocks the operation."""


class ServiceRunning(LakecoreError):
    """Another live process runs this table service (or this service instant) right now."""

    retryable = True


class WriteConflict(LakecoreError):
    """Another writer changed the same file groups first (optimistic concurrency); ours was rolled back."""

    retryable = True

    def __init__(self, message: str, *, instant: str = "", conflicts: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.instant = instant
        self.conflicts = conflicts  # lakecore.concurrency.conflicts.occ.Conflict values

    @classmethod
    def of(cls, instant: str, conflicts: Sequence[Any]) -> WriteConflict:
        detail = "; ".join(c.describe() for c in conflicts)
        return cls(f"write {instant} conflicts with concurrent writes: {detail}. It was rolled back and "
                   "nothing of it is visible: retry it (the input is unchanged), or give concurrent "
                   "writers disjoint partitions or buckets", instant=instant, conflicts=tuple(conflicts))


class EarlyConflict(WriteConflict):
    """Early conflict detection found an older live writer (or a newer commit) on our file groups."""

    def __init__(self, message: str, *, instant: str = "", other: str = "",
                 file_groups: frozenset[tuple[str, str]] = frozenset(), bytes_written: int = 0,
                 detected_at: int | None = None, aborted_by: str = "") -> None:
        super().__init__(message, instant=instant)
        self.other = other
        self.file_groups = file_groups
        self.bytes_written = bytes_written  # what our write had written before it stopped
        self.detected_at = detected_at      # epoch ms of the check that found `other` live
        self.aborted_by = aborted_by        # who decided, when the abort came from outside (the operator)

    def report(self) -> dict[str, Any]:
        """The structured result the Spark jobs and the operator record."""
        report = {"instant": self.instant, "other": self.other, "bytes_written": self.bytes_written,
                  "file_groups": sorted([p, f] for p, f in self.file_groups), "message": str(self),
                  "detected_at": self.detected_at}
        if self.aborted_by:
            report["aborted_by"] = self.aborted_by
        return report

    def __reduce__(self) -> tuple[Any, ...]:  # survives pickling from executors to the driver
        return (_rebuild_early, (str(self), self.instant, self.other, self.file_groups, self.bytes_written,
                                 self.detected_at, self.aborted_by))


def _rebuild_early(message: str, instant: str, other: str, file_groups: frozenset[tuple[str, str]],
                   bytes_written: int, detected_at: int | None = None, aborted_by: str = "") -> EarlyConflict:
    return EarlyConflict(message, instant=instant, other=other, file_groups=file_groups,
                         bytes_written=bytes_written, detected_at=detected_at, aborted_by=aborted_by)


class SchemaConflict(LakecoreError):
    """Concurrent writers evolved the table schema incompatibly."""


class HeartbeatExpired(LakecoreError):
    """This writer missed its heartbeats for too long; its instant may be rolled back by others."""


class WriterRegistryUnavailable(LakecoreError):
    """The writer registry (ZooKeeper) could not be reached in time."""

    retryable = True


class WriterAlreadyRegistered(LakecoreError):
    """A writer is registered for this instant already."""


class AbortFlagUnavailable(LakecoreError):
    """ZooKeeper did not answer in time while raising, listing or clearing abort flags."""

    retryable = True


# -- table services ----------------------------------------------------------------------------


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


class InvalidCompactionStrategy(ServiceError, InvalidInput):
    """A compaction strategy names an unknown kind, or a bound that is not a non-negative integer."""


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


# -- the merge engine: lakecore errors that are also ValueErrors (bad arguments to a pure function) --


class InvalidMergeSpec(InvalidTableConfig, ValueError):
    """A merge spec is inconsistent, or does not fit the table schema."""


class InvalidChanges(InvalidInput, ValueError):
    """A change batch cannot be merged: missing or null key, bad op values, NaN ordering."""


# -- publishing for other engines --------------------------------------------------------------


class PublishError(LakecoreError):
    """Publishing a table's Iceberg or Delta metadata failed."""


class NotPublishable(PublishError, InvalidInput):
    """The target format cannot show what was asked: a column type it cannot hold, a merged view of
    column groups; nothing was published."""


class PublishConflict(PublishError):
    """Another publish of the same target committed first, or a clean removed a file the snapshot
    needs; publishing again (of the newest instant) succeeds."""

    retryable = True


class CatalogError(PublishError):
    """The published Iceberg table could not be registered in its catalog (unreachable, refused, or the
    name holds another table); the published files are intact and the next publish registers them."""

    retryable = True
