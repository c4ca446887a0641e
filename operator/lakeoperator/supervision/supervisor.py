"""Supervision: the operator watches every live write of its tables and stops the loser of a conflict
from outside, rolls back dead writers' instants, and reports what it sees.

One `Supervisor` per operator (the leader's), store- and launcher-agnostic: what it decides goes to a
`SupervisorSink` (sink.py: writers' status and Events through the store, a loser's driver stopped
through the launcher, on a cluster and under `weir run` alike; kubernetes.py adds the operator's
metrics and conflict retries). Each watched table is scanned every `period_s` on the
supervisor's thread (lakecore reads are blocking):

1. the timeline and the live writes with the file groups their markers hold
   (lakecore.concurrency.conflicts.outside), the registered writers (who writes which instant); reported to
   `sink.observed` (writers' current instants, and a commit, `CommitsSeen`: the table's status and its
   services' triggers are due at once, not at their periodic refresh);
2. for every conflict (loser = the younger write, the rules of the commit check): the decision goes to
   both writers' status FIRST (`sink.record`; an operator that dies after it finds the decision there,
   and the loser already dead, so it never decides twice), then the loser's proof of death under the
   table lock (fencing: it can never commit) and, on ZooKeeper tables, its abort flag (the writer hears
   of it at once; else it sees the proof of death within its abort-check period), then Events and
   metrics (`sink.aborted`);
3. a loser still beating `grace_s` after its abort is stopped (`sink.stop_loser`: its driver deleted) —
   also after an operator restart, from the proof of death it recorded;
4. dead writes (heartbeat expired, or aborted and stopped for longer than a heartbeat timeout) are
   rolled back under the table lock, each re-checked there (lakecore.concurrency.rollback).

Before each pass, the pending writes of drivers known gone (`driver_ended`: the operator saw the pod end
or be deleted; `weir run` calls `abort_stopped` as it settles) get their proof of death at once, so they
read aborted, and the next write rolls them back, without waiting for their heartbeat timeout.

Non-blocking and single-writer tables are scanned for dead writes only: their writers never conflict
on what the supervisor could see. Must not: plan restarts (the writer's planner does, from the decision
in its status and its driver's exit), or talk to Kubernetes (the sink does).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from lakecore.concurrency.conflicts.outside import (
    LiveWrite,
    OutsideConflict,
    abort_loser,
    find_outside_conflicts,
    live_writes,
)
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.timeline import Timeline, TimelineStore
from lakecore.timeline.metadata import writer_of
from lakecore.write.markers import bytes_named
from lakeoperator.specs import parse_lake_table

log = logging.getLogger(__name__)

DECIDED_BY = "weir-operator"
TableKey = tuple[str, str]   # namespace, LakeTable name


@dataclass(frozen=True)
class WatchedTable:
    """What the supervisor needs of a Ready LakeTable."""

    namespace: str
    name: str
    location: str
    mode: str                                  # optimistic | non_blocking | single_writer
    heartbeat: HeartbeatConfig
    storage_options: Mapping[str, Any] | None = None
    zookeeper: str | None = None               # the table lock's ensemble: abort flags and the registry
    zookeeper_path: str | None = None          # its lock path, when the spec names one
    zookeeper_credentials: Any = None          # lakecore.concurrency.zookeeper.Credentials, or None

    @property
    def key(self) -> TableKey:
        return (self.namespace, self.name)


@dataclass(frozen=True)
class Decision:
    """One conflict the supervisor decided: `loser` must stop."""

    table: WatchedTable
    conflict: OutsideConflict
    loser_writer: str | None        # "namespace/name" of the LakeWriter writing the loser, if registered
    winner_writer: str | None
    decided_at: datetime
    loser_bytes: int = 0            # what the loser had written when it was stopped

    @property
    def loser(self) -> str:
        return self.conflict.loser

    @property
    def winner(self) -> str:
        return self.conflict.winner


@dataclass(frozen=True)
class TableReport:
    """One scan's view of a table: the live writers (by LakeWriter, when registered)."""

    table: WatchedTable
    writes: tuple[LiveWrite, ...]
    writers: Mapping[str, str]      # instant -> "namespace/name"
    scanned_at_ms: int
    infos: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # instant -> registry info
    last_completed: str | None = None   # the latest completed instant by completion time (latestInstant)


class SupervisorSink(Protocol):
    def record(self, decision: Decision) -> bool:
        """Write the decision to both writers' status before anything is done about it; False: could
        not (the API is unreachable), the supervisor tries again at its next scan."""
        ...

    def aborted(self, decision: Decision, applied: bool) -> None:
        """The loser was aborted (`applied`), or had committed first (the decision is void)."""
        ...

    def stop_loser(self, decision: Decision) -> None:
        """The loser still runs `grace_s` after its abort: stop its driver (idempotent)."""
        ...

    def observed(self, report: TableReport) -> None:
        """A table was scanned (status and metrics of its live writers)."""
        ...


@dataclass
class _Open:
    """A watched table opened: its storage, lock and registry (re-opened when the spec changes)."""

    table: WatchedTable
    storage: Any
    lock: Any
    registry: Any
    watch: Any = None                  # a ZooKeeper registry's child watch: it marks `writers` stale
    stale: bool = True
    writers: dict[str, str] = field(default_factory=dict)
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()


@dataclass
class _Pending:
    decision: Decision
    aborted_at: float | None = None      # monotonic, once the abort was recorded
    stopped: bool = False


@dataclass
class Supervisor:
    sink: SupervisorSink
    period_s: float = 1.0
    grace_s: float = 10.0
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    # raises a loser's abort flag in ZooKeeper: (table, its storage uri, instant, record)
    abort_flag: Callable[[WatchedTable, str, str, Mapping[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        self._guard = threading.Lock()
        self._tables: dict[TableKey, WatchedTable] = {}
        self._open: dict[TableKey, _Open] = {}
        self._pending: dict[tuple[TableKey, str], _Pending] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # drivers known gone whose writes the next pass aborts: (writer, submission) -> table
        self._ended: dict[tuple[str, str], TableKey] = {}
        self._told: OrderedDict[tuple[str, str], None] = OrderedDict()   # those already seen to
        self.scans = 0

    # -- what to watch -------------------------------------------------------------------------

    def watch(self, table: WatchedTable) -> None:
        with self._guard:
            if self._tables.get(table.key) == table:
                return
            self._tables[table.key] = table
            old = self._open.pop(table.key, None)
        if old is not None:
            old.close()

    def forget(self, namespace: str, name: str) -> None:
        with self._guard:
            self._tables.pop((namespace, name), None)
            old = self._open.pop((namespace, name), None)
            for key in [k for k in self._pending if k[0] == (namespace, name)]:
                del self._pending[key]
        if old is not None:
            old.close()

    def watched(self) -> list[TableKey]:
        with self._guard:
            return sorted(self._tables)

    # -- the loop ------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="weir-supervisor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=10)

    def close(self) -> None:
        """Stop, and end the registry watches."""
        self.stop()
        with self._guard:
            opened, self._open = list(self._open.values()), {}
        for o in opened:
            o.close()

    def driver_ended(self, writer: str, submission: str, table: TableKey) -> None:
        """The driver of `submission` of the LakeWriter `writer` ("namespace/name") writing to `table` is
        known gone (its pod ended, or was deleted once its containers stopped): the next pass of this
        supervisor aborts its pending writes (abort_stopped), rather than leave them to their heartbeat
        timeout. Ignored while the supervisor is stopped (a standby replica's) and for a driver already
        told of (a pod's several events)."""
        if self._thread is None:
            return
        with self._guard:
            if (writer, submission) in self._told:
                return
            self._told[(writer, submission)] = None
            if len(self._told) > 4096:
                self._told.popitem(last=False)
            self._ended[(writer, submission)] = table
        self._wake.set()

    def _abort_ended(self) -> None:
        with self._guard:
            ended, self._ended = self._ended, {}
        for table in set(ended.values()):
            drivers = {writer: submission for (writer, submission), t in ended.items() if t == table}
            for (namespace, name), instant in self.abort_stopped(drivers, "weir operator", tables={table}):
                log.info("the write %s to LakeTable %s/%s ended with its driver", instant, namespace, name)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._abort_ended()
            self.run_once()
            self._wake.wait(max(0.0, self.period_s - (time.monotonic() - started)))
            self._wake.clear()

    def run_once(self) -> list[Decision]:
        """Scan every watched table once; the decisions taken."""
        with self._guard:
            tables = list(self._tables.values())
        decided: list[Decision] = []
        for table in tables:
            try:
                decided.extend(self.scan(table))
            except Exception as exc:  # one table's storage or ZooKeeper trouble must not stop the others
                log.warning("supervising table %s/%s at %s failed: %s: %s", table.namespace, table.name,
                            table.location, type(exc).__name__, exc)
        self.scans += 1
        return decided

    def abort_stopped(self, drivers: Mapping[str, str], by: str, *, lock_timeout_s: float = 5.0,
                      tables: Collection[TableKey] | None = None) -> list[tuple[TableKey, str]]:
        """Record the proof of death of every pending write of a driver known to be gone (`drivers`: the
        LakeWriter "namespace/name" -> the submission its stopped driver ran), on every watched table:
        the registry's info names both, so a write of another run of a writer of the same name is
        never taken for one. `weir table describe` then says aborted, not alive, and the next write
        rolls it back at once rather than after its heartbeat timeout. A table whose lock is not had
        within `lock_timeout_s` (a lock the stopped driver held, say) is left to that timeout, as
        before. `tables`: only those of the watched tables. Returns (table, instant) of each write
        aborted."""
        from lakecore.concurrency.rollback import abort_pending, is_pending_write

        aborted: list[tuple[TableKey, str]] = []
        if not drivers:
            return aborted
        with self._guard:
            watched = [t for t in self._tables.values() if tables is None or t.key in tables]
        for table in watched:
            try:
                opened = self._opened(table)
                store = TimelineStore(opened.storage)
                pending = {i.requested_time for i in store.load().pending if is_pending_write(store, i)}
                if not pending:
                    continue
                infos = {t: dict(i) for t, i in opened.infos.items() if t in pending}
                infos.update(opened.registry.live_writers(opened.storage.uri))
                for t in sorted(pending & set(infos)):
                    writer, submission = infos[t].get("writer"), infos[t].get("submission")
                    if submission is None or drivers.get(str(writer)) != str(submission):
                        continue
                    details = {"reason": "stopped", "decided_by": by, "writer": writer,
                               "submission": submission}
                    if abort_pending(opened.storage, opened.lock, t, f"{by}: its driver was stopped", details,
                                     lock_timeout=lock_timeout_s):
                        aborted.append((table.key, t))
            except Exception as exc:   # advisory: its heartbeat expires all the same
                log.warning("could not record that the stopped writers' writes to %s/%s are over: %s: %s",
                            table.namespace, table.name, type(exc).__name__, exc)
        return aborted

    # -- one table -----------------------------------------------------------------------------

    def scan(self, table: WatchedTable) -> list[Decision]:
        from lakecore.timeline import TimelineStore, now_ms

        opened = self._opened(table)
        store = TimelineStore(opened.storage)
        timeline = store.load()
        now = now_ms()
        writes = live_writes(opened.storage, timeline, table.heartbeat, now)
        pending = {i.requested_time for i in timeline.pending}
        writers = self._writers(opened, table, bool(pending))
        last = timeline.last_completed()
        self.sink.observed(TableReport(table, tuple(writes), writers, now, opened.infos if writers else {},
                                       last.requested_time if last else None))
        decisions: list[Decision] = []
        if table.mode == "optimistic" and writes:
            for conflict in find_outside_conflicts(opened.storage, "optimistic", table.heartbeat,
                                                   timeline=timeline, now=now, writes=writes):
                decision = self._decide(opened, table, conflict, writers, store, timeline)
                if decision is not None:
                    decisions.append(decision)
        self._follow_up(opened, table, pending)
        self._roll_back_dead(opened, table, timeline, writes, writers, now)
        return decisions

    def _opened(self, table: WatchedTable) -> _Open:
        with self._guard:
            opened = self._open.get(table.key)
        if opened is not None:
            return opened
        from lakecore import Table
        from lakecore.concurrency.liveness.writers import StorageWriterRegistry, ZooKeeperWriterRegistry
        from lakecore.concurrency.locks.choice import lock_for_spec

        t = Table.open(table.location, storage_options=dict(table.storage_options or {}) or None)
        lock, registry = t.lock, cast(Any, StorageWriterRegistry(t.storage))
        if table.zookeeper:
            from lakecore.concurrency.zookeeper import ensure_table_paths

            # the table's paths (lock, writers, abort flags) with its tenant's ACL; the operator's lock,
            # registry and flags use the tenant's credentials, never its own environment's
            creds = table.zookeeper_credentials
            ensure_table_paths(table.zookeeper, t.storage.uri, credentials=creds,
                               lock_path=table.zookeeper_path)
            lock = lock_for_spec(t.storage, t.config.lock, {"credentials": creds})
            registry = ZooKeeperWriterRegistry(table.zookeeper, credentials=creds)
        opened = _Open(table, t.storage, lock, registry)
        if table.zookeeper:   # writers join and leave: re-read the registry only then
            opened.watch = registry.watch(t.storage.uri, lambda live: setattr(opened, "stale", True))
        with self._guard:
            if self._tables.get(table.key) == table:
                self._open[table.key] = opened
                return opened
        opened.close()   # forgotten or changed meanwhile
        return opened

    def _writers(self, opened: _Open, table: WatchedTable, any_pending: bool) -> dict[str, str]:
        """instant -> LakeWriter of every registered writer (live or not: an aborted loser still
        running is stopped by its writer's name)."""
        if not any_pending:
            return {}
        if opened.watch is not None and not opened.stale:
            return opened.writers   # nobody joined or left since the last read
        opened.stale = False
        try:
            live = opened.registry.live_writers(opened.storage.uri)
        except Exception as exc:  # advisory: decisions do not need it, statuses do
            opened.stale = True
            log.warning("the writer registry of %s/%s is unavailable: %s", table.namespace, table.name, exc)
            return {}
        opened.writers = {t: str(info["writer"]) for t, info in live.items() if info.get("writer")}
        opened.infos = {t: dict(info) for t, info in live.items()}
        return opened.writers

    def _decide(self, opened: _Open, table: WatchedTable, conflict: OutsideConflict,
                writers: Mapping[str, str], store: TimelineStore, timeline: Timeline) -> Decision | None:
        key = (table.key, conflict.loser)
        with self._guard:
            if key in self._pending and self._pending[key].aborted_at is not None:
                return None
        winner_writer = writers.get(conflict.winner)
        if winner_writer is None and conflict.winner_completed:   # left the registry: its commit names it
            winner_writer = _committed_writer(store, timeline, conflict.winner)
        conflict = replace(conflict, loser_writer=writers.get(conflict.loser),
                           winner_writer=winner_writer)   # both named in the proof of death
        decision = Decision(table, conflict, conflict.loser_writer, conflict.winner_writer,
                            self.clock(), bytes_named(opened.storage, conflict.loser))
        if not self.sink.record(decision):
            return None
        applied = abort_loser(opened.storage, opened.lock, conflict, DECIDED_BY)
        if applied and table.zookeeper and self.abort_flag is not None:
            try:
                self.abort_flag(table, opened.storage.uri, conflict.loser, conflict.details(DECIDED_BY))
            except Exception as exc:  # the proof of death on storage stands; the writer polls it
                log.warning("could not raise the ZooKeeper abort flag of %s: %s", conflict.loser, exc)
        if applied:
            with self._guard:
                self._pending[key] = _Pending(decision, time.monotonic())
        self.sink.aborted(decision, applied)
        return decision

    def _follow_up(self, opened: _Open, table: WatchedTable, pending: set[str]) -> None:
        """Stop losers still running after the grace period; forget the ones that are gone."""
        now = time.monotonic()
        with self._guard:
            mine = [(k, p) for k, p in self._pending.items() if k[0] == table.key]
        for key, p in mine:
            if key[1] not in pending:
                with self._guard:
                    self._pending.pop(key, None)
                continue
            if not p.stopped and p.aborted_at is not None and now - p.aborted_at >= self.grace_s:
                p.stopped = True
                self.sink.stop_loser(p.decision)

    def _roll_back_dead(self, opened: _Open, table: WatchedTable, timeline: Any, writes: list[LiveWrite],
                        writers: Mapping[str, str], now: int) -> None:
        from lakecore.concurrency.liveness.heartbeat import is_expired, last_sign_of_life, read_aborted
        from lakecore.concurrency.rollback import is_pending_write, rollback_write
        from lakecore.timeline import TimelineStore

        live = {w.instant for w in writes}
        store = TimelineStore(opened.storage)
        hb = table.heartbeat
        for inst in timeline.pending:
            t = inst.requested_time
            if t in live or not is_pending_write(store, inst):
                continue
            record = read_aborted(opened.storage, t)
            sign = last_sign_of_life(opened.storage, t)
            if record is not None:
                # aborted: its writer rolls it back itself; if it still beats past the grace period,
                # the decision's stop is due (again, after an operator restart); once it has been
                # silent for a heartbeat timeout it is gone, and the rollback is ours
                if not is_expired(sign, now, hb):
                    self._stop_again(table, t, record, writers.get(t), now)
                    continue
            elif not is_expired(sign, now, hb):
                continue
            try:
                if rollback_write(opened.storage, opened.lock, inst, only_if_expired=hb,
                                  by=f"{DECIDED_BY}: its writer is gone") is not None:
                    log.info("rolled back the dead write %s of %s/%s", t, table.namespace, table.name)
            except Exception as exc:
                log.warning("rolling back the dead write %s of %s/%s failed: %s", t, table.namespace,
                            table.name, exc)

    def _stop_again(self, table: WatchedTable, instant: str, record: Mapping[str, Any], writer: str | None,
                    now_ms: int) -> None:
        if record.get("decided_by") != DECIDED_BY or record.get("reason") != "conflict":
            return
        key = (table.key, instant)
        with self._guard:
            known = key in self._pending
        at = int(record.get("at") or 0)
        if known or now_ms - at < self.grace_s * 1000:
            return
        # decided by an earlier operator (or before a restart): stop it once, as it would have
        from lakecore.concurrency.conflicts.outside import OutsideConflict

        conflict = OutsideConflict(instant, str(record.get("other") or ""),
                                   frozenset(tuple(g) for g in record.get("file_groups") or ()), None,
                                   int(record.get("marker_at") or 0))
        decision = Decision(table, conflict, writer, None, self.clock())
        with self._guard:
            self._pending[key] = _Pending(decision, time.monotonic(), stopped=True)
        self.sink.stop_loser(decision)


def _committed_writer(store: TimelineStore, timeline: Timeline, instant_time: str) -> str | None:
    """The LakeWriter a completed write's commit names (`--extra writer=...`), or None."""
    found = timeline.find(instant_time)   # the scan's timeline: the winner completed before it was read
    if found is None or not found.is_completed:
        return None
    try:
        return writer_of(store.metadata(found).extra)
    except Exception as exc:  # advisory: the decision does not need the name
        log.debug("could not read the writer of %s: %s", instant_time, exc)
        return None


def watched_table(namespace: str, body: Mapping[str, Any], secret_options: Mapping[str, Any] | None,
                  zookeeper_credentials: Any = None) -> WatchedTable:
    """What the supervisor needs of a LakeTable (SpecError when its spec is invalid)."""
    from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig

    spec = parse_lake_table(body)
    options = {**spec.storage.options, **(secret_options or {})}
    return WatchedTable(namespace, str(body["metadata"]["name"]), spec.location, spec.concurrency.mode,
                        HeartbeatConfig(float(spec.heartbeat.interval_seconds),
                                        spec.heartbeat.tolerable_misses), options or None,
                        spec.lock.connect, spec.lock.path, zookeeper_credentials)


def zookeeper_abort_flag(table: WatchedTable, table_uri: str, instant: str,
                          record: Mapping[str, Any]) -> None:
    """The loser's abort flag in ZooKeeper (its writer watches it), with the table's tenant credentials."""
    from lakecore.concurrency.liveness.aborts import raise_abort_flag
    from lakecore.concurrency.zookeeper import Endpoint

    assert table.zookeeper is not None
    raise_abort_flag(Endpoint(table.zookeeper, credentials=table.zookeeper_credentials), table_uri,
                            instant, record)


__all__ = [
    "DECIDED_BY",
    "Decision",
    "Supervisor",
    "SupervisorSink",
    "TableKey",
    "TableReport",
    "WatchedTable",
    "watched_table",
    "zookeeper_abort_flag",
]
