"""`WriterOptions`: how this process writes a table (not part of the table), one small value per concern.

    heartbeat      how often the writer beats and how many beats it may miss (also judges other writers,
                   and the table services this process runs)
    files          the files a write makes: rows per file, whether they may add columns to the table
    conflicts      meeting other writers: early conflict detection, re-running a write that lost
    markers        markers through a marker service on the driver (tasks reach it over HTTP)
    registration   the registry a supervisor watches live writers in, and this writer's name there
    after_commit   what runs after each commit: rollback of dead writers, inline table services
    abort_watch    how a writer hears of an abort decided outside it (the operator's, a rollback's)

Every value has defaults, so `WriterOptions()` is a plain writer; change one concern with
`WriterOptions(conflicts=ConflictOptions(retries=3))` or `replace(options, markers=...)`. Values only:
the write path (`writer.py`) reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lakecore.concurrency.conflicts.early import EarlyDetection
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.concurrency.liveness.writers import WriterRegistry
from lakecore.services import ArchivalPolicy, ClusteringStrategy, Trigger


@dataclass(frozen=True)
class FileOptions:
    """The files a write makes."""

    max_rows_per_file: int | None = None   # roll log files over (bounds what an early abort wastes)
    evolve_schema: bool = False            # let writes add nullable columns to the table


@dataclass(frozen=True)
class ConflictOptions:
    """Meeting other writers: find a conflict before writing a file, and re-run a write that lost one."""

    early_detection: EarlyDetection | None = None
    retries: int = 0                       # re-run a write that lost a conflict this many times
    retry_backoff_s: float = 0.2           # first pause between runs; doubles, capped at 10 s, jittered


@dataclass(frozen=True)
class MarkerOptions:
    """Markers through a marker service on the driver (implied by the marker_service early detection)."""

    batched: bool = False
    batch_interval_s: float = 0.05
    files: int = 20                        # marker files the service spreads its batches over
    # where the marker service listens, and the host its URL gives executors (default: the bind host;
    # executors on other machines need e.g. bind "0.0.0.0" and the driver's host name)
    bind_host: str = "127.0.0.1"
    advertise_host: str | None = None


@dataclass(frozen=True)
class RegistrationOptions:
    """Where a live write is registered for a supervisor to watch (e.g. ZooKeeperWriterRegistry), and who
    writes (e.g. the LakeWriter) in its info."""

    registry: WriterRegistry | None = None
    writer_name: str | None = None


@dataclass(frozen=True)
class AfterCommitOptions:
    """What runs after each commit; the write is durable first, so a failure here is a warning."""

    clean_failed_writes: bool = True       # roll back writes whose heartbeat expired
    compaction: Trigger | None = None      # compact when due (merge-on-read)
    clean: Trigger | None = None           # clean (default policy) when due
    clustering: Trigger | None = None      # cluster with `clustering_strategy` when due
    clustering_strategy: ClusteringStrategy = field(default_factory=ClusteringStrategy)
    # archive the oldest completed instants once more than archival.max_instants are active
    archival: ArchivalPolicy | None = field(default_factory=ArchivalPolicy)

    @property
    def any_service(self) -> bool:
        return (self.compaction, self.clean, self.clustering, self.archival) != (None, None, None, None)


@dataclass(frozen=True)
class AbortWatchOptions:
    """An abort decided outside the writer: look for the instant's proof of death every `check_s`, watch
    its abort flag on this ZooKeeper (hears at once); `on_abort` is told the abort record when it lands
    (e.g. to cancel the engine's running jobs)."""

    check_s: float = 1.0
    zookeeper: str | None = None
    on_abort: Callable[[dict[str, Any]], None] | None = None


@dataclass(frozen=True)
class WriterOptions:
    """How this process writes (not part of the table), one value per concern (see the module docstring)."""

    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)
    files: FileOptions = field(default_factory=FileOptions)
    conflicts: ConflictOptions = field(default_factory=ConflictOptions)
    markers: MarkerOptions = field(default_factory=MarkerOptions)
    registration: RegistrationOptions = field(default_factory=RegistrationOptions)
    after_commit: AfterCommitOptions = field(default_factory=AfterCommitOptions)
    abort_watch: AbortWatchOptions = field(default_factory=AbortWatchOptions)
