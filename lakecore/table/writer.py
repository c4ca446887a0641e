"""The driver side of one write: instant, heartbeat, tasks, commit — and cleanup when it fails.

Owns the order of a write's steps in one process (the Spark jobs run the same steps with Spark
tasks): begin the instant, start its heartbeat, run one task per file group on a thread per core, stop
the other tasks as soon as one fails, commit under the lock, and on any failure roll back only
after every task has stopped (so no task writes a file after its markers were used to clean up).
Bounded retry of a whole write that lost a conflict is opt-in.

An abort decided outside the writer (the operator's, on a conflict between writers) is heard by the
job's abort watch (concurrency/liveness/aborts.py): the engine is told (`on_abort`), tasks here stop before
their next file, the commit refuses, and the write ends with the EarlyConflict built from the
decision — never retried: whoever decided expects this writer to stop.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any

import pyarrow as pa

from lakecore.concurrency import (
    Lock,
    WriteTransaction,
    begin_write,
    commit_write,
    replaced_groups,
    rollback_failed_writes,
    rollback_write,
)
from lakecore.concurrency.conflicts.early import EarlyConflictDetector, Found, async_checker
from lakecore.concurrency.conflicts.schema import complete_writer_schema
from lakecore.concurrency.liveness.aborts import AbortWatch
from lakecore.concurrency.liveness.heartbeat import Heartbeat, HeartbeatConfig, mark_aborted, read_aborted
from lakecore.concurrency.liveness.writers import Registration, launch_info, writer_info
from lakecore.concurrency.locks.protocol import lock_times
from lakecore.config import TableConfig
from lakecore.errors import (
    CleanPending,
    ClusteringPending,
    CompactionPending,
    EarlyConflict,
    InvalidInstantState,
    SchemaConflict,
    ServiceRunning,
    WriteAborted,
    WriteConflict,
)
from lakecore.services import (
    CleanPolicy,
    run_archival,
    run_clean,
    run_clustering,
    run_compaction,
    schedule_clustering,
    schedule_compaction,
)
from lakecore.services.triggers import due
from lakecore.storage import Storage
from lakecore.table.options import AfterCommitOptions, WriterOptions
from lakecore.timeline import Instant, RowCounts, Timeline, TimelineStore, WriteStat, now_ms
from lakecore.write import (
    BackgroundSyncs,
    DirectMarkers,
    FileGroupRows,
    Marker,
    MarkerWriter,
    Operation,
    WriteContext,
    delete_unreported,
    empty_group,
    write_file_group,
)
from lakecore.write.marker_service import MarkerClient, MarkerService, ServiceMarkers
from lakecore.write.markers import bytes_named

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteResult:
    """A committed write. `warnings`: what went wrong after the commit point (inline services, cleanup
    of dead writers, leftover markers) — the write is durable and visible regardless."""

    instant: Instant
    stats: tuple[WriteStat, ...]
    attempts: int = 1
    warnings: tuple[str, ...] = ()

    @property
    def records(self) -> int:
        """Rows in the files written, deletes included (`counts` names them apart)."""
        return sum(s.records for s in self.stats)

    @property
    def counts(self) -> RowCounts:
        return RowCounts.of(self.stats)

    @property
    def file_groups(self) -> int:
        return len({(s.partition, s.file_id) for s in self.stats})


class _Stoppable:
    """Wraps the marker writer so that sibling tasks stop before their next file once one failed."""

    def __init__(self, inner: MarkerWriter, job: WriteJob | None = None) -> None:
        self.inner = inner
        self.job = job
        self.stopped = threading.Event()

    def create(self, storage: Storage, marker: Marker, partition: str, file_id: str) -> None:
        if self.stopped.is_set():
            raise WriteAborted(f"write {marker.instant_time} stopped: another task of it failed")
        if self.job is not None:
            self.job.raise_if_aborted()  # aborted from outside: no further file
        self.inner.create(storage, marker, partition, file_id)


def write_groups(storage: Storage, config: TableConfig, lock: Lock, operation: Operation,
                 groups: Sequence[FileGroupRows], options: WriterOptions,
                 extra: Mapping[str, Any] | None = None, *, table_schema: pa.Schema | None = None
                 ) -> WriteResult:
    """Write routed rows as one instant, the file groups on this process's task threads.
    `config.schema` is the writer's schema, `table_schema` the table's (they differ when the write
    adds columns)."""
    attempt = 0
    touched = sorted({g.partition for g in groups}) if operation == "insert_overwrite" else None
    while True:
        attempt += 1
        try:
            job = WriteJob.start(storage, config, lock, operation, options, table_schema=table_schema,
                                 extra=extra, partitions=touched)
            with job:
                markers = _Stoppable(job.markers, job)
                ctx = job.context(markers)
                emptied = job.replaced_without_rows((g.partition, g.file_id) for g in groups)
                stats = _run_tasks(ctx, markers, [*groups, *emptied])
                result = job.commit(stats)
            return replace(result, attempts=attempt)
        except WriteConflict as exc:
            if attempt > options.conflicts.retries or (isinstance(exc, EarlyConflict) and exc.aborted_by):
                raise  # out of retries, or aborted from outside: whoever decided expects us to stop
            delay = options.conflicts.retry_backoff_s * (2 ** (attempt - 1))
            time.sleep(min(delay, 10.0) * (0.5 + random.random()))


def task_threads(tasks: int) -> int:
    """Threads that write a write's file groups at once: one per core (Parquet encoding, compression
    and the file I/O release the GIL), no more than there are groups."""
    return max(1, min(tasks, os.cpu_count() or 2))


def _run_tasks(ctx: WriteContext, markers: _Stoppable, groups: Sequence[FileGroupRows]) -> list[WriteStat]:
    """Write every group on `task_threads` threads; once one task fails the others stop before their
    next file, and only after all of them stopped is the first cause raised (then rolled back). The
    data files are synced on threads of their own while the tasks go on (`BackgroundSyncs`); this
    returns once every one is durable, and a failed sync fails the write."""
    threads = task_threads(len(groups))
    with BackgroundSyncs(threads) as syncs, \
            ThreadPoolExecutor(max_workers=threads, thread_name_prefix="weir-task") as pool:
        ctx = replace(ctx, syncs=syncs)
        futures = [pool.submit(write_file_group, ctx, g) for g in groups]
        finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
        if any(f.exception() is not None for f in finished):
            markers.stopped.set()
            wait(futures)  # every task has stopped before anything is cleaned up
            raise _first_cause([e for f in futures if (e := f.exception()) is not None])
        stats = [s for f in futures for s in f.result()]
        syncs.wait()
        return stats


def _in_table_schema(txn: WriteTransaction) -> WriteTransaction:
    """The write with the table's nullable columns its writer lacks (its handle predates them): its
    rows read them as null, and its tasks merge and rewrite base files with them, so a copy-on-write
    rewrite keeps the values other writers stored there."""
    full = complete_writer_schema(txn.schema_at_start, txn.config.schema)
    if full.names == txn.config.schema.names:
        return txn
    # a column-group table's columns each need their group, which only a fresh config knows
    return replace(txn, config=txn.config.with_committed_schema(full))


class WriteJob:
    """The driver's handle on one write whose file-group tasks may run in any process (the Spark
    writers run them in executors; `write_groups` on threads):

        job = WriteJob.start(...)          # requested -> inflight, heartbeat, registration, markers
        ctx = job.context()                # pickles: each task calls write_file_group(ctx, group)
        job.commit(stats)                  # stats of every task; conflict check, complete, services
        job.abort(error)                   # or: roll back (after every task has stopped)

    Used as a context manager, an exception before `commit` returned aborts the write. The heartbeat
    beats from the driver for as long as the job is open, so tasks elsewhere need no liveness of
    their own; the operator's registration (options.registration) lasts as long."""

    def __init__(self, txn: WriteTransaction, lock: Lock, options: WriterOptions,
                 extra: Mapping[str, Any] | None) -> None:
        self.txn, self.lock, self.options, self.extra = txn, lock, options, dict(extra or {})
        self.heartbeat = Heartbeat(txn.storage, txn.instant.requested_time, options.heartbeat)
        self.registration: Registration | None = None
        self.service: MarkerService | None = None
        self.found: list[Found] = []
        self.markers: MarkerWriter = DirectMarkers()
        self.finished = False
        self.warnings: list[str] = []
        self.abort_watch: AbortWatch | None = None
        self.aborted_by_other: dict[str, Any] | None = None  # the record of an abort decided outside

    @classmethod
    def start(cls, storage: Storage, config: TableConfig, lock: Lock, operation: Operation,
              options: WriterOptions | None = None, *, table_schema: pa.Schema | None = None,
              extra: Mapping[str, Any] | None = None, partitions: Iterable[str] | None = None) -> WriteJob:
        """Begin the instant. `config.schema` is the writer's schema (see write_groups). `partitions`:
        for insert_overwrite, the partition paths its input touches (the ones it replaces)."""
        options = options or WriterOptions()
        need_view = config.table_type == "copy_on_write" or operation == "bulk_insert"
        txn = begin_write(storage, config, lock, operation, need_view=need_view, table_schema=table_schema,
                          partitions=partitions)
        try:
            txn = _in_table_schema(txn)
        except SchemaConflict:
            _abandon(storage, lock, txn)
            raise
        job = cls(txn, lock, options, extra)
        job.heartbeat.start()
        try:
            job.registration = _register(storage, txn, options, lock)
            job.abort_watch = AbortWatch(storage, txn.instant.requested_time, job._heard_abort,
                                         check_s=options.abort_watch.check_s,
                                         zookeeper=options.abort_watch.zookeeper).start()
            job.markers, job.service = _marker_writer(txn, options, job.found)
        except BaseException as exc:
            _mark_dead(storage, txn.instant.requested_time, exc, options.registration.writer_name)
            job._close()
            _abandon(storage, lock, txn)
            raise
        return job

    @property
    def instant(self) -> Instant:
        return self.txn.instant

    def replaced_without_rows(self, written: Iterable[tuple[str, str]]) -> list[FileGroupRows]:
        """For an overwrite: the file groups of its scope that `written` (the groups given rows)
        misses, as empty groups to write like any other (each becomes an empty base file that
        replaces the group's slice). Empty for other writes."""
        return [empty_group(self.txn.config, p, f) for p, f in replaced_groups(self.txn, written)]

    def context(self, markers: MarkerWriter | None = None, *, write_token: str = "0-0-0") -> WriteContext:
        """What each task needs (pickles); `markers` wraps or replaces the job's marker writer;
        `write_token` goes into file names: engines that retry tasks give each attempt its own."""
        return self.txn.context(write_token, markers=markers or self.markers,
                                max_rows_per_file=self.options.files.max_rows_per_file)

    def commit(self, stats: Sequence[WriteStat], *, reconcile: bool = False) -> WriteResult:
        """Complete the instant with every task's stats (under the lock, after the conflict check),
        then run what is due after a commit (failed-write cleanup, inline services). On a conflict
        the instant is rolled back and WriteConflict raised. `reconcile`: first delete the data files
        the instant's markers name that no stat does (what failed or speculative task attempts wrote:
        engines that retry tasks pass True). Once the completed instant exists this returns its
        WriteResult: problems after the commit point are logged and listed in `warnings`, never
        raised (a caller that retried would write the data twice)."""
        if self.finished:
            raise InvalidInstantState(f"write {self.instant.requested_time} is already finished")
        try:
            if self.service is not None:
                self.service.stop()
                self.service = None
            if reconcile:
                delete_unreported(self.txn.storage, self.instant.requested_time, (s.path for s in stats))
            self.check_alive()
            done = commit_write(self.txn, stats, extra=self.extra, lock=self.lock, alive=self.check_alive)
        except WriteConflict as exc:
            if isinstance(exc, EarlyConflict) and self.aborted_by_other is not None:
                self.abort(exc)  # ours, from check_alive: nothing was rolled back yet
                raise
            self.finished = True  # commit_write rolled the instant back already
            self._close()
            raise
        except BaseException as exc:
            landed = _landed(self.txn.storage, self.instant)
            if landed is None:
                # an abort that landed after our last look is refused under the lock: say who decided
                conflict = self._aborted_meanwhile(exc)
                self.abort(conflict or exc)
                if conflict is not None:
                    raise conflict from exc
                raise
            done = landed  # the commit point passed before the error (e.g. a lost reply): it is durable
            log.warning("write %s of %s completed although committing reported %s: %s",
                        self.instant.requested_time, self.txn.storage.uri, type(exc).__name__, exc)
            self.warnings.append(f"committing reported {type(exc).__name__} after the instant completed: "
                                 f"{exc}")
        self.finished = True
        self._close()
        self.warnings.extend(_after_commit(self.txn.storage, self.txn.config, self.lock, self.options))
        return WriteResult(done, tuple(stats), warnings=tuple(self.warnings))

    def abort(self, error: BaseException | None = None) -> None:
        """Roll the write back (call once every task has stopped). An EarlyConflict `error` gets the
        other instant, file groups and bytes this write had written filled in."""
        if self.finished:
            return
        self.finished = True
        if self.abort_watch is not None:  # our own proof of death below is no news to us
            self.abort_watch.close()
        txn = self.txn
        if isinstance(error, EarlyConflict):
            if self.found and not error.other:  # raised by a marker service client: only a message
                error.other, error.file_groups = self.found[0].other, frozenset({self.found[0].file_group})
                error.detected_at = self.found[0].checked_at or None
            error.bytes_written = bytes_named(txn.storage, txn.instant.requested_time)
        # proof of death before the heartbeat goes: others must never see this instant as live again
        _mark_dead(txn.storage, txn.instant.requested_time, error, self.options.registration.writer_name)
        self._close()
        _abandon(txn.storage, self.lock, txn)

    # -- an abort decided outside ----------------------------------------------------------------

    def _heard_abort(self, record: dict[str, Any]) -> None:
        """The abort watch's callback (its own thread): remember, then let the engine stop its tasks."""
        self.aborted_by_other = record
        log.warning("write %s of %s was aborted by %s (%s); stopping", self.instant.requested_time,
                    self.txn.storage.uri, _decider(record), record.get("reason", "no reason given"))
        if self.options.abort_watch.on_abort is not None:
            self.options.abort_watch.on_abort(record)

    def outside_conflict(self) -> EarlyConflict | None:
        """The EarlyConflict this write ends with, once someone else aborted it for a conflict; None
        while not, and for other aborts (a rollback that took the instant for dead ends the write as
        the lost heartbeat it is, not as a conflict)."""
        record = self.aborted_by_other
        if record is None or record.get("reason") != "conflict":
            return None
        instant = self.instant.requested_time
        other = str(record.get("other") or "")
        groups = frozenset((str(g[0]), str(g[1])) for g in record.get("file_groups") or ()
                           if isinstance(g, list | tuple) and len(g) == 2)
        by = _decider(record)
        reason = str(record.get("reason") or "no reason recorded")
        against = f" in favour of write {other}" if other else ""
        on = f" on file groups {', '.join('/'.join(g) for g in sorted(groups))}" if groups else ""
        after = f"after write {other} completes or aborts" if other else "once the table is clear"
        at = record.get("at")
        return EarlyConflict(
            f"write {instant} was aborted from outside by {by} ({reason}){against}{on}; it was rolled back: "
            f"rerun it {after}", instant=instant, other=other, file_groups=groups,
            detected_at=at if isinstance(at, int) else None, aborted_by=by)

    def raise_if_aborted(self) -> None:
        """Raise the EarlyConflict of an abort decided outside, if one was heard."""
        conflict = self.outside_conflict()
        if conflict is not None:
            raise conflict

    def check_alive(self) -> None:
        """Raise unless this write may still complete: not aborted from outside, heartbeat not lost."""
        self.raise_if_aborted()
        self.heartbeat.check()

    def _aborted_meanwhile(self, error: BaseException) -> EarlyConflict | None:
        """After a failed commit: the EarlyConflict of an abort decided outside, heard or (when the
        commit refused the instant under the lock) found on storage now. Read before our own abort
        records anything, so a record found is someone else's."""
        if self.aborted_by_other is None and isinstance(error, InvalidInstantState):
            try:
                self.aborted_by_other = read_aborted(self.txn.storage, self.instant.requested_time)
            except Exception as exc:
                log.warning("could not read why write %s was refused: %s", self.instant.requested_time, exc)
        return self.outside_conflict()

    def _close(self) -> None:
        if self.abort_watch is not None:
            self.abort_watch.close()
        if self.service is not None:
            self.service.stop()
            self.service = None
        if self.registration is not None:
            self.registration.close()
            self.registration = None
        self.heartbeat.stop()

    def __enter__(self) -> WriteJob:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.finished:
            self.abort(error)


def _decider(record: Mapping[str, Any]) -> str:
    return str(record.get("decided_by") or record.get("by") or "another process")


def _register(storage: Storage, txn: WriteTransaction, options: WriterOptions,
              lock: Lock | None = None) -> Registration | None:
    """Register the write; its info carries how long drawing its instant waited for and held the table
    lock (`lock`'s times), what a supervisor reports of the writer."""
    if options.registration.registry is None:
        return None
    info = writer_info(txn.operation)
    times = lock_times(lock)
    if times is not None:
        info.update(times.as_ms())
    if options.registration.writer_name:
        info["writer"] = options.registration.writer_name
    info.update(launch_info())  # the operator's name for the writer wins over the engine's
    return options.registration.registry.register(storage.uri, txn.instant.requested_time, info)


def _first_cause(errors: list[BaseException]) -> BaseException:
    """The error that stopped the write, not the WriteAborted its sibling tasks raised after it."""
    causes = [e for e in errors if not isinstance(e, WriteAborted)]
    return (causes or errors)[0]


def _marker_writer(txn: WriteTransaction, options: WriterOptions, found: list[Found]
                   ) -> tuple[MarkerWriter, MarkerService | None]:
    """Direct markers, direct markers with early checks, or a marker service (batched markers, with
    the asynchronous early check when that strategy is chosen)."""
    detection = options.conflicts.early_detection
    if txn.config.concurrency_mode != "optimistic":
        detection = None
    if not options.markers.batched and (detection is None or detection.strategy != "marker_service"):
        if detection is None:
            return DirectMarkers(), None
        return EarlyConflictDetector(txn.instant, detection, options.heartbeat), None
    service = MarkerService(txn.storage, batch_interval_s=options.markers.batch_interval_s,
                            num_files=options.markers.files, host=options.markers.bind_host,
                            advertise_host=options.markers.advertise_host)
    url = service.start()
    if detection is not None:
        checker = async_checker(txn.storage, txn.instant, detection, options.heartbeat, found)
        service.set_conflict_checker(checker, detection.period_s)
    return ServiceMarkers(MarkerClient(url)), service


def _after_commit(storage: Storage, config: TableConfig, lock: Lock, options: WriterOptions) -> list[str]:
    """Roll back dead writers' leftovers, then run the services that are due: both decide from one
    load of the timeline (each step re-checks under the lock what it acts on). The write has
    committed: nothing here raises; returns what went wrong (also logged)."""
    after = options.after_commit
    services = after.any_service
    if not (services or after.clean_failed_writes):
        return []
    warnings: list[str] = []
    try:
        timeline = TimelineStore(storage).load()
    except Exception as exc:
        return _post_commit(warnings, storage, "loading the timeline for inline services", exc)
    if after.clean_failed_writes:
        try:
            rollback_failed_writes(storage, lock, options.heartbeat, timeline=timeline)
        except Exception as exc:
            _post_commit(warnings, storage, "rolling back dead writers", exc)
    if services:
        _inline_services(storage, config, lock, after, options.heartbeat, timeline, warnings)
    return warnings


def _post_commit(warnings: list[str], storage: Storage, doing: str, exc: BaseException) -> list[str]:
    """Record a problem after the commit point: logged, and returned in the WriteResult."""
    busy = isinstance(exc, ServiceRunning | CompactionPending | ClusteringPending | CleanPending)
    message = f"{doing} failed after the write committed ({type(exc).__name__}: {exc})"
    log.log(logging.INFO if busy else logging.WARNING, "%s on %s", message, storage.uri)
    if not busy:  # another process runs that service now: nothing went wrong
        warnings.append(message)
    return warnings


def _inline_services(storage: Storage, config: TableConfig, lock: Lock, after: AfterCommitOptions,
                     hb: HeartbeatConfig, timeline: Timeline, warnings: list[str]) -> None:
    """Run the services whose triggers are due. The write has committed: a service that cannot run
    now (another run is live or pending) is left for the next write or the scheduler; any other
    failure is reported as a warning."""
    now = now_ms()
    if after.compaction is not None and config.table_type == "merge_on_read" \
            and due(after.compaction, timeline, "compaction", now):
        try:
            plan = schedule_compaction(storage, config, lock)
            if plan is not None:
                run_compaction(storage, config, lock, plan, heartbeat=hb)
        except Exception as exc:
            _post_commit(warnings, storage, "inline compaction", exc)
    if after.clustering is not None and \
            due(after.clustering, timeline, "replacecommit", now):
        try:
            clustering = schedule_clustering(storage, config, lock, after.clustering_strategy)
            if clustering is not None:
                run_clustering(storage, config, lock, clustering, heartbeat=hb)
        except Exception as exc:
            _post_commit(warnings, storage, "inline clustering", exc)
    if after.clean is not None and due(after.clean, timeline, "clean", now):
        try:
            run_clean(storage, config, lock, CleanPolicy(), dry_run=False, heartbeat=hb)
        except Exception as exc:
            _post_commit(warnings, storage, "inline clean", exc)
    archival = after.archival
    if archival is not None and len(timeline.completed) > archival.max_instants:
        try:
            run_archival(storage, lock, archival, heartbeat=hb)
        except Exception as exc:  # the next write archives again
            _post_commit(warnings, storage, "inline archival", exc)


def _landed(storage: Storage, instant: Instant) -> Instant | None:
    """Our instant, if it completed (after an error whose outcome was unknown); None if it did not or
    we cannot tell (then the caller rolls back: rollback refuses a completed instant)."""
    try:
        found = TimelineStore(storage).load().find(instant.requested_time)
    except Exception as exc:
        log.warning("could not check whether write %s completed: %s", instant.requested_time, exc)
        return None
    return found if found is not None and found.is_completed else None


def _mark_dead(storage: Storage, instant_time: str, error: BaseException | None,
               writer: str | None = None) -> None:
    try:
        mark_aborted(storage, instant_time, f"aborted: {type(error).__name__ if error else 'abort'}",
                     now_ms(), {"writer": writer} if writer else None)
    except Exception as exc:  # the rollback that follows records it too
        log.warning("could not record that write %s aborted: %s", instant_time, exc)


def _abandon(storage: Storage, lock: Lock, txn: WriteTransaction) -> None:
    try:
        rollback_write(storage, lock, txn.instant, by=f"abort of {txn.instant.requested_time}")
    except Exception as exc:  # its proof of death stands: the next writer or the cleaner rolls it back
        log.warning("could not roll back the aborted write %s of %s now (%s: %s); it is marked dead, so "
                    "the next writer or `weir table clean --run` rolls it back", txn.instant.requested_time,
                    storage.uri, type(exc).__name__, exc)
