"""The operator's control loop on Kubernetes: a keyed work queue over the reconcile core.

kopf watches the three kinds and the driver pods and calls `Controller.notify*` (handlers.py); each
notification queues the resource's key. Workers take keys off the queue and run one reconcile pass in a
thread: read the resource fresh from the API (never a cached copy: a restart-class decision must see
the latest spec and pod), gather its inputs (observe.py, with the API as the store), run the
launcher-agnostic core (reconcile.py) with the Kubernetes launcher, write the status it returns (skipped
when nothing changed; guarded by the resourceVersion read, so a stale pass fails with Conflict and runs
again), post its Events (also when that write failed: what the pass did to pods happened), and queue
the key again after the core's `requeue_after`. `reconcile` is a dispatch over the three kinds.

The queue gives the guarantees the core's idempotence builds on: one key is never reconciled by two
workers at once; a key notified while it is being reconciled runs once more afterwards; a burst of
notifications for one key is one pass; a delayed requeue is replaced by an earlier one, never doubled.

Owns: the queue, the per-kind pass (finalizer of a LakeTable with deletionPolicy Delete, the writer's
applied spec kept in status.appliedSpec, a table's dependents re-queued when it changes — not when only
its timeline's fields did), a table's pass queued at once on a commit (one the supervisor's scan sees,
or a writer's attempt that ended) besides its periodic refresh, which tables the supervisor watches,
metrics. Must not decide what to do (plan/), build objects (builders/) or read a pass's inputs itself
(observe.py); talks to the API only through kube.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter as Tally
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.kube import Conflict, Kube, KubeError, with_applied
from lakeoperator.launch.kubernetes import KubernetesLauncher
from lakeoperator.metrics import OperatorMetrics
from lakeoperator.observe import (
    TableInputs,
    observe_service,
    observe_table,
    observe_writer,
    same_location,
    storage_options,
)
from lakeoperator.plan.writer import SUBMISSION_LABEL
from lakeoperator.reconcile import Outcome, reconcile
from lakeoperator.specs import ObjectRef, SpecError, parse_lake_table
from lakeoperator.status import TIMELINE_FIELDS, deleting_status, ended_attempts, parse_timestamp
from lakeoperator.supervision import Supervisor, watched_table, zookeeper_abort_flag
from lakeoperator.supervision.kubernetes import KubeSink

Key = tuple[str, str, str]   # kind, namespace, name
KINDS = ("LakeTable", "LakeWriter", "TableService")
FINALIZER = "weir.dev/delete-data"
ERROR_RETRY_S = 5.0           # a pass that failed (API or storage unreachable) runs again after this
MAX_ERROR_RETRY_S = 60.0
PHASES = {"LakeTable": ("Pending", "Ready", "Failed"),
          "LakeWriter": ("Pending", "Submitted", "Running", "Succeeded", "Failed", "Aborted", "Suspended",
                         "BackingOff"),
          "TableService": ("Idle", "Running")}
log = logging.getLogger(__name__)


class WorkQueue:
    """Keys to reconcile, each at most once in the queue and never handed out twice at a time."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._active: set[Key] = set()
        self._again: set[Key] = set()
        self._timers: dict[Key, tuple[float, asyncio.TimerHandle]] = {}

    def add(self, key: Key) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer[1].cancel()
        if key in self._active:
            self._again.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def add_after(self, key: Key, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        current = self._timers.get(key)
        if current is not None:
            if current[0] <= when:
                return
            current[1].cancel()
        self._timers[key] = (when, loop.call_at(when, self._fire, key))

    def _fire(self, key: Key) -> None:
        self._timers.pop(key, None)
        self.add(key)

    async def get(self) -> Key:
        key = await self._queue.get()
        self._queued.discard(key)
        self._active.add(key)
        return key

    def done(self, key: Key) -> None:
        self._active.discard(key)
        if key in self._again:
            self._again.discard(key)
            self.add(key)

    def forget(self, key: Key) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer[1].cancel()

    def close(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def __len__(self) -> int:
        return len(self._queued) + len(self._active)


@dataclass(frozen=True)
class ControllerSettings:
    pod: PodSettings = field(default_factory=PodSettings)
    workers: int = 8
    supervise_period_s: float = 1.0     # how often every supervised table is scanned for conflicts
    conflict_grace_s: float = 10.0      # a loser still running this long after its abort is deleted


class Controller:
    """Reconciles Weir resources on a Kubernetes API server (see the module docstring)."""

    def __init__(self, kube: Kube, settings: ControllerSettings = ControllerSettings(),
                 metrics: OperatorMetrics | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC), *,
                 supervise: bool = True) -> None:
        self.kube = kube
        self.launcher = KubernetesLauncher(kube)
        self.settings = settings
        self.metrics = metrics or OperatorMetrics()
        self.clock = clock
        self.queue: WorkQueue | None = None
        self.leading: asyncio.Event | None = None      # workers take keys only while it is set
        self._loop: asyncio.AbstractEventLoop | None = None
        self._leading_from_start = True
        self._tasks: list[asyncio.Task[None]] = []
        self._threads: ThreadPoolExecutor | None = None   # one thread per worker, the passes' own
        self._table_of: dict[Key, str] = {}      # writer/service key -> the LakeTable it refers to
        self._phase_of: dict[Key, str] = {}
        self._phases_shown: dict[str, set[str]] = {kind: set() for kind in PHASES}
        self._table_seen: dict[Key, Any] = {}    # LakeTable key -> its last event, timeline fields left out
        self._errors: Tally[Key] = Tally()
        self._last_event: dict[Key, tuple[str, str, str]] = {}
        self.supervisor: Supervisor | None = None
        if supervise:
            sink = KubeSink(kube, self.launcher, grace_s=settings.conflict_grace_s, metrics=self.metrics,
                            on_commit=self.notify_commit_threadsafe,
                            on_writer=lambda namespace, name: self.notify_threadsafe(
                                ("LakeWriter", namespace, name)))
            self.supervisor = Supervisor(sink, period_s=settings.supervise_period_s,
                                         grace_s=settings.conflict_grace_s, clock=clock,
                                         abort_flag=zookeeper_abort_flag)

    # -- notifications (from the kopf handlers) -------------------------------------------------

    def notify(self, kind: str, body: Mapping[str, Any], *, deleted: bool = False) -> None:
        """A Weir resource was added, changed or deleted."""
        meta = body.get("metadata") or {}
        key: Key = (kind, str(meta.get("namespace") or "default"), str(meta.get("name")))
        if deleted:
            self._table_of.pop(key, None)
            self._forget_phase(key)
            self._last_event.pop(key, None)
            self._table_seen.pop(key, None)
            if self.queue is not None:
                self.queue.forget(key)
            return
        if kind != "LakeTable":
            ref = ((body.get("spec") or {}).get("tableRef") or {}).get("name")
            if ref:
                self._table_of[key] = str(ref)
            self._add(key)
            return
        seen = _apart_from_timeline(body)
        if self._table_seen.get(key) == seen:   # only what a commit changes: written by the pass that
            return                               # derived it, read by no writer (services: the commit's)
        self._table_seen[key] = seen
        self._add(key)
        for dependent, table in list(self._table_of.items()):   # they may wait on it (missing, now created)
            if table == key[2] and dependent[1] == key[1]:
                self._add(dependent)

    def notify_pod(self, pod: Mapping[str, Any], *, deleted: bool = False) -> None:
        """A driver pod changed: reconcile the writer or service that owns it. A writer's driver that ended
        (the pod Succeeded or Failed, or was deleted: its containers stopped) has its pending writes
        aborted by the supervisor at once, not after their heartbeat timeout."""
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        namespace = str(meta.get("namespace") or "default")
        if labels.get("weir.dev/writer"):
            writer = str(labels["weir.dev/writer"])
            submission, table = labels.get(SUBMISSION_LABEL), labels.get("weir.dev/table")
            ended = deleted or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if ended and submission and table and self.supervisor is not None:
                self.supervisor.driver_ended(f"{namespace}/{writer}", str(submission),
                                             (namespace, str(table)))
            self._add(("LakeWriter", namespace, writer))
        elif labels.get("weir.dev/service"):
            self._add(("TableService", namespace, str(labels["weir.dev/service"])))

    def _add(self, key: Key) -> None:
        if self.queue is not None:
            self.queue.add(key)

    def notify_threadsafe(self, key: Key) -> None:
        """Queue `key` from another thread (the supervisor's)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._add, key)

    def notify_commit_threadsafe(self, namespace: str, table: str) -> None:
        """A commit on the table (from the supervisor's thread, or a writer's attempt that ended): derive
        its status again and re-evaluate its TableServices' triggers now, not at their periodic refresh."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._committed, namespace, table)

    def _committed(self, namespace: str, table: str) -> None:
        self._add(("LakeTable", namespace, table))
        self._services_of(namespace, table)

    # -- the loop ------------------------------------------------------------------------------

    def expect_election(self) -> None:
        """Leader election decides when this replica works (leader.py): not before it leads."""
        self._leading_from_start = False

    def set_leading(self, leading: bool) -> None:
        """Start or stop taking keys (thread-safe: the elector calls it from its thread)."""
        self.metrics.leader.set(1 if leading else 0)
        if self.supervisor is not None:
            if leading:
                self.supervisor.start()
            else:
                self.supervisor.stop()
        if self._loop is None or self.leading is None:
            self._leading_from_start = leading
            return
        event = self.leading
        self._loop.call_soon_threadsafe(event.set if leading else event.clear)

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.leading = asyncio.Event()
        if self._leading_from_start:
            self.leading.set()
            self.metrics.leader.set(1)
            if self.supervisor is not None:
                self.supervisor.start()
        self.queue = WorkQueue()
        workers = max(1, self.settings.workers)
        # passes run on threads of their own, one per worker: not the loop's default executor, whose few
        # threads (CPUs + 4) would cap the workers and are shared with kopf and the lease (leader.py)
        self._threads = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="weir-reconcile")
        self._tasks = [asyncio.create_task(self._work(), name=f"weir-worker-{i}") for i in range(workers)]

    async def stop(self) -> None:
        if self.supervisor is not None:
            await asyncio.to_thread(self.supervisor.stop)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self._threads is not None:
            self._threads.shutdown(wait=False)   # a pass in flight finishes on its own
            self._threads = None
        if self.queue is not None:
            self.queue.close()

    async def _work(self) -> None:
        assert self.queue is not None
        queue, leading = self.queue, self.leading
        assert leading is not None
        while True:
            await leading.wait()
            key = await queue.get()
            if not leading.is_set():   # lost the lease while waiting: the key waits for the next leader
                queue.done(key)
                queue.add(key)
                continue
            try:
                assert self._threads is not None
                delay = await asyncio.get_running_loop().run_in_executor(self._threads, self.reconcile, key)
            except Exception:   # reconcile reports what it can; this is the last resort: log and retry
                log.exception("reconcile of %s %s/%s failed", *key)
                delay = self._backoff(key)
            finally:
                queue.done(key)
            if delay is not None:
                queue.add_after(key, delay)

    def _backoff(self, key: Key) -> float:
        self._errors[key] += 1
        return min(MAX_ERROR_RETRY_S, ERROR_RETRY_S * 2 ** (self._errors[key] - 1))

    # -- one pass ------------------------------------------------------------------------------

    def reconcile(self, key: Key) -> float | None:
        """One reconcile pass of `key`; the seconds until the next one (None: until it changes)."""
        kind, namespace, name = key
        started = time.perf_counter()
        outcome_label = "ok"
        try:
            body = self.kube.get(kind, namespace, name)
            if body is None:
                self._table_of.pop(key, None)
                self._forget_phase(key)
                return None
            if kind == "LakeTable":
                delay = self._table(key, body)
            elif kind == "LakeWriter":
                delay = self._writer(key, body)
            else:
                delay = self._service(key, body)
            self._errors.pop(key, None)
            return delay
        except Conflict:
            outcome_label = "conflict"
            return 0.0           # changed under us: read again and re-plan
        except KubeError as exc:
            outcome_label = "error"
            log.warning("reconcile of %s %s/%s: %s", kind, namespace, name, exc)
            return self._backoff(key)
        except Exception:
            outcome_label = "error"
            raise
        finally:
            self.metrics.record_reconcile(kind, outcome_label, time.perf_counter() - started)

    def _table(self, key: Key, body: dict[str, Any]) -> float | None:
        meta = body["metadata"]
        ref = ObjectRef.from_body(body)
        policy = (body.get("spec") or {}).get("deletionPolicy") or "Retain"
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            return self._delete_table(key, body, ref, policy, finalizers)
        if ref.managed and not ref.paused:
            if policy == "Delete" and FINALIZER not in finalizers:
                body = self.kube.set_finalizers(body, [*finalizers, FINALIZER])
            elif policy != "Delete" and FINALIZER in finalizers:
                body = self.kube.set_finalizers(body, [f for f in finalizers if f != FINALIZER])
        elif not ref.managed and FINALIZER in finalizers:   # detached: the operator no longer owns its data
            body = self.kube.set_finalizers(body, [f for f in finalizers if f != FINALIZER])
        inputs = observe_table(self.kube, body)
        outcome = reconcile(inputs, self.launcher, self.clock(), self.settings.pod)
        if inputs.secret_error is None:   # (a missing Secret: the supervisor goes on as it was)
            self._supervise(key, inputs, outcome.status)
        return self._report(key, body, outcome, key[2])

    def _writer(self, key: Key, body: dict[str, Any]) -> float | None:
        if body["metadata"].get("deletionTimestamp"):
            return None   # its pods are owned by it: the garbage collector removes them
        inputs = observe_writer(self.kube, body)
        outcome = reconcile(inputs, self.launcher, self.clock(), self.settings.pod)
        if outcome.applied is not None:
            outcome = replace(outcome, status=with_applied(outcome.status, outcome.applied))
        return self._report(key, body, outcome, inputs.table_name)

    def _service(self, key: Key, body: dict[str, Any]) -> float | None:
        if body["metadata"].get("deletionTimestamp"):
            return None
        inputs = observe_service(self.kube, body)
        outcome = reconcile(inputs, self.launcher, self.clock(), self.settings.pod)
        return self._report(key, body, outcome, inputs.table_name)

    def _supervise(self, key: Key, inputs: TableInputs, status: Mapping[str, Any]) -> None:
        """A Ready table the operator manages is supervised; any other is not (any more)."""
        if self.supervisor is None:
            return
        ref = ObjectRef.from_body(inputs.body)
        table = None
        if status.get("phase") == "Ready" and ref.managed and not ref.paused:
            if inputs.zookeeper_error is not None:   # its Secret is missing: looked at again next pass
                log.warning("LakeTable %s/%s is not supervised: %s", key[1], key[2], inputs.zookeeper_error)
            else:
                try:
                    table = watched_table(key[1], inputs.body, inputs.storage_options,
                                          inputs.zookeeper_credentials)
                except SpecError as exc:
                    log.warning("LakeTable %s/%s is not supervised: %s", key[1], key[2], exc)
        if table is None:
            self.supervisor.forget(key[1], key[2])
        else:
            self.supervisor.watch(table)

    def _delete_table(self, key: Key, body: dict[str, Any], ref: ObjectRef, policy: str,
                      finalizers: list[str]) -> float | None:
        """deletionPolicy Delete: once no LakeWriter or TableService refers to the table any more, its
        data is deleted, then the finalizer is removed. Paused: nothing (the finalizer stays);
        unmanaged or Retain: the finalizer goes and the data stays."""
        if self.supervisor is not None:
            self.supervisor.forget(key[1], key[2])
        if FINALIZER not in finalizers:
            return None
        if ref.paused:
            return None
        if policy == "Delete" and ref.managed:
            users = [f"{kind} {b['metadata']['name']}" for kind in ("LakeWriter", "TableService")
                     for b in self.kube.list_all(kind, key[1])
                     if ((b.get("spec") or {}).get("tableRef") or {}).get("name") == key[2]
                     and not b["metadata"].get("deletionTimestamp")]
            if users:
                message = (f"the table's data is deleted once nothing writes to it; still referring to it: "
                           f"{', '.join(sorted(users))} (delete them, or set deletionPolicy: Retain)")
                status = deleting_status(ref, body.get("status"), message, self.clock())
                if status != body.get("status"):
                    self.kube.replace_status(body, status)
                    self.kube.post_event(body, "Warning", "DeletionWaiting", message)
                return 10.0
            spec = parse_lake_table(body)
            kept = self._data_kept(key, body, spec.location)
            if kept is not None:
                self.kube.post_event(body, "Warning", "DataKept", kept)
            else:
                secret = storage_options(self.kube, key[1], spec)
                delete_table_data(spec.location, {**spec.storage.options, **(secret or {})} or None)
                self.kube.post_event(body, "Normal", "Deleted",
                                     f"deleted the table's data at {spec.location}")
        self.kube.set_finalizers(body, [f for f in finalizers if f != FINALIZER])
        return None

    def _data_kept(self, key: Key, body: Mapping[str, Any], location: str) -> str | None:
        """Why deleting this LakeTable must not delete the data at `location`, or None: it never created
        or adopted the table there (it was refused: status.location does not record it), or another
        LakeTable of the namespace names that location."""
        if not same_location((body.get("status") or {}).get("location"), location):
            return (f"the table at {location} was never created or adopted by this LakeTable (it was "
                    "refused); its data stays")
        others = sorted(b["metadata"]["name"] for b in self.kube.list_all("LakeTable", key[1])
                        if b["metadata"]["name"] != key[2] and not b["metadata"].get("deletionTimestamp")
                        and same_location((b.get("spec") or {}).get("location"), location))
        if others:
            return (f"LakeTable {', '.join(others)} names the table at {location} too; its data stays "
                    "(delete that LakeTable with deletionPolicy Delete to delete it)")
        return None

    def _report(self, key: Key, body: dict[str, Any], outcome: Outcome,
                table_name: str | None) -> float | None:
        """Write the status (when it changed) and the new Events, count what the pass did."""
        kind, namespace, _ = key
        table = table_name or key[2]
        if outcome.submitted:
            self.metrics.record_submission(kind, namespace, table)
        old = body.get("status") or {}
        changed = outcome.status != old
        try:
            if changed:
                self.kube.replace_status(body, outcome.status)
        finally:
            # what the pass did (a driver pod created or deleted) happened even when its status write
            # failed (Conflict, the API unreachable): the next pass finds it done and plans no Event
            # of its own for it, so this pass's Events are posted either way
            self._post_events(key, body, outcome.events)
        if changed:
            ended = ended_attempts(kind, old, outcome.status)
            if ended and kind == "LakeWriter":   # its commit, if any, shows in the table's status now
                self.notify_commit_threadsafe(namespace, table)
            for cause in ended:
                if cause != "success":
                    self.metrics.record_restart(kind, namespace, table, cause)
                if cause == "conflict" and (marker := parse_timestamp(
                        (old.get("lastConflict") or {}).get("markerAt"))) is not None:
                    self.metrics.conflict_stop.labels(namespace, table).observe(
                        max(0.0, (self.clock() - marker).total_seconds()))
        self._count_phase(key, outcome.status)
        return outcome.requeue_after

    def _post_events(self, key: Key, body: Mapping[str, Any],
                     events: tuple[tuple[str, str, str], ...]) -> None:
        for type_, reason, message in events:
            if self._last_event.get(key) == (type_, reason, message):
                continue   # the same Event as this resource's last one: a pass repeated, not news
            self._last_event[key] = (type_, reason, message)
            log.log(logging.WARNING if type_ == "Warning" else logging.INFO, "%s %s/%s: %s: %s",
                    key[0], key[1], key[2], reason, message)
            self.kube.post_event(body, type_, reason, message)

    def _services_of(self, namespace: str, table: str) -> None:
        """Re-evaluate the triggers of the table's TableServices now, not at their next recheck."""
        for key, ref in list(self._table_of.items()):
            if key[0] == "TableService" and key[1] == namespace and ref == table:
                self._add(key)

    def _count_phase(self, key: Key, status: Mapping[str, Any]) -> None:
        kind = key[0]
        phase = status.get("phase") or ("Running" if status.get("activeRun") else "Idle"
                                        if kind == "TableService" else "Pending")
        if self._phase_of.get(key) == phase:
            return
        self._phase_of[key] = str(phase)
        self._publish_phases(kind)

    def _forget_phase(self, key: Key) -> None:
        """A resource gone: it counts in no phase any more."""
        if self._phase_of.pop(key, None) is not None:
            self._publish_phases(key[0])

    def _publish_phases(self, kind: str) -> None:
        counts = Tally(p for k, p in self._phase_of.items() if k[0] == kind)
        self.metrics.set_phases(kind, counts, {*PHASES[kind], *self._phases_shown[kind]})
        self._phases_shown[kind] |= set(counts)   # a phase outside PHASES reads 0 once it has none


def _apart_from_timeline(table: Mapping[str, Any]) -> Any:
    """A LakeTable body (as plain values) without its resourceVersion and the status fields a commit
    changes: equal for two events means the second only refreshed what the table's timeline says."""
    body = _plain(table)
    for name in ("resourceVersion", "managedFields"):
        body.get("metadata", {}).pop(name, None)
    for name in TIMELINE_FIELDS:
        (body.get("status") or {}).pop(name, None)
    return body


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def delete_table_data(location: str, storage_options: dict[str, Any] | None = None) -> None:
    """Every file of the table at `location`; its config first, so an interrupted delete leaves no
    half-table that could be adopted (the finalizer stays, so the delete runs again). Then, on storage
    with directories (local disk), the empty directories below the location."""
    from lakecore.storage import open_storage, remove_empty_dirs
    from lakecore.table.table import CONFIG_PATH

    storage = open_storage(location, storage_options)
    if storage.exists(CONFIG_PATH):
        storage.delete(CONFIG_PATH)
    for info in storage.list_tree(""):
        storage.delete(info.path)
    remove_empty_dirs(storage, "")


__all__ = ["FINALIZER", "Controller", "ControllerSettings", "WorkQueue", "delete_table_data"]
