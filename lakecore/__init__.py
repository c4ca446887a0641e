"""lakecore: Weir's lake table format — timeline, file groups, copy-on-write and merge-on-read,
payload merging with ordering fields and column groups, snapshot / time-travel / incremental reads.

No Spark, no Kubernetes, no kopf here; those layers build on this API. The names below are the public
surface: the table, its configuration and writer options, the table services' policies and
strategies, and every error (all defined in `lakecore.errors`).
"""

from lakecore.concurrency.conflicts.early import EarlyDetection
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.config import ColumnGroup, LockSpec, TableConfig
from lakecore.errors import (
    AbortFlagUnavailable,
    AlreadyExists,
    AtomicCreateUnsupported,
    BeforeFirstCommit,
    CleanPending,
    ClusteringConflict,
    ClusteringPending,
    CompactionPending,
    CorruptMetadata,
    CorruptTimeline,
    DamagedFile,
    EarlyConflict,
    FilesCleaned,
    HeartbeatExpired,
    HistoryMoved,
    InstantArchived,
    InstantNotFound,
    InvalidChanges,
    InvalidClusteringStrategy,
    InvalidInput,
    InvalidInstantState,
    InvalidMergeSpec,
    InvalidStorageOptions,
    InvalidTableConfig,
    LakecoreError,
    LockAlreadyHeld,
    LockError,
    LockProviderChanged,
    LockProviderMismatch,
    LockTimeout,
    LockUnavailable,
    LockUnsupported,
    MarkerServiceError,
    MissingColumn,
    NeedsHistory,
    NotMergeOnRead,
    NullKey,
    RollbackBlocked,
    SavepointNotFound,
    SchemaConflict,
    SchemaMismatch,
    ServiceError,
    ServiceRunning,
    StorageAccessDenied,
    StorageError,
    StorageFull,
    TableAlreadyExists,
    TableNotFound,
    UnknownOperation,
    UnsupportedTableVersion,
    UnsupportedType,
    WriteAborted,
    WriteConflict,
    WriterAlreadyRegistered,
    WriterLive,
    WriterRegistryUnavailable,
    ZooKeeperAccessDenied,
)
from lakecore.services import ArchivalPolicy, CleanPolicy, ClusteringStrategy, CompactionStrategy, Trigger
from lakecore.table import Table, WriteJob, WriteResult, WriterOptions
from lakecore.timeline import Instant, State, Timeline
from lakecore.write import WriteInput

__all__ = ["AbortFlagUnavailable", "AlreadyExists", "ArchivalPolicy", "AtomicCreateUnsupported",
           "BeforeFirstCommit", "CleanPending", "CleanPolicy", "ClusteringConflict", "ClusteringPending",
           "ClusteringStrategy", "ColumnGroup", "CompactionPending", "CompactionStrategy",
           "CorruptMetadata", "CorruptTimeline", "DamagedFile", "EarlyConflict", "EarlyDetection",
           "FilesCleaned", "HeartbeatConfig", "HeartbeatExpired", "HistoryMoved", "Instant",
           "InstantArchived", "InstantNotFound", "InvalidChanges", "InvalidClusteringStrategy",
           "InvalidInput", "InvalidInstantState", "InvalidMergeSpec", "InvalidStorageOptions",
           "InvalidTableConfig", "LakecoreError", "LockAlreadyHeld", "LockError", "LockProviderChanged",
           "LockProviderMismatch", "LockSpec", "LockTimeout", "LockUnavailable", "LockUnsupported",
           "MarkerServiceError", "MissingColumn", "NeedsHistory", "NotMergeOnRead", "NullKey",
           "RollbackBlocked", "SavepointNotFound", "SchemaConflict", "SchemaMismatch", "ServiceError",
           "ServiceRunning", "State", "StorageAccessDenied", "StorageError", "StorageFull", "Table",
           "TableAlreadyExists", "TableConfig", "TableNotFound", "Timeline", "Trigger", "UnknownOperation",
           "UnsupportedTableVersion", "UnsupportedType", "WriteAborted", "WriteConflict", "WriteInput",
           "WriteJob", "WriteResult", "WriterAlreadyRegistered", "WriterLive", "WriterOptions",
           "WriterRegistryUnavailable", "ZooKeeperAccessDenied"]
