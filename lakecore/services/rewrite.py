"""The run protocol shared by the services that rewrite file slices (compaction, clustering).

    resume:   lock -> reload -> completed already? (unlock, delete the markers a dead process left,
              return it) -> still pending, not claimed by a rollback, not aborted? -> claim the run
              (liveness.runs: ServiceRunning while a live run holds it) -> unlock -> delete what
              dead attempts wrote (through its markers) -> move it inflight
    execute:  one task per planned operation, on a thread pool (`run_tasks`); file names carry the
              run's attempt, so attempts never share a file
    commit:   lock -> reload -> still our claim? still inflight, not rolled back? -> (reconcile:
              delete files of task attempts no stat reports) -> metadata (None: the service
              declines, e.g. a clustering that lost a conflict) -> complete -> unlock -> delete
              markers -> release the claim
    rollback: only a pending instant of the service's own action nobody runs (or forced), through
              concurrency.rollback

A service supplies its action, its name for messages, and what its commit records.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from lakecore.concurrency import Lock, ensure_held, rollback_write
from lakecore.concurrency.liveness.heartbeat import DEFAULT_HEARTBEAT, HeartbeatConfig, is_aborted
from lakecore.concurrency.liveness.runs import ServiceRun, forget
from lakecore.concurrency.rollback import claimed_by_rollbacks
from lakecore.config import TableConfig, schema_from_json
from lakecore.errors import InvalidInstantState, LakecoreError
from lakecore.storage import Storage
from lakecore.timeline import (
    Action,
    CommitMetadata,
    Instant,
    State,
    Timeline,
    TimelineStore,
    next_instant_time,
    pending_overwrite,
)
from lakecore.write import delete_markers, delete_unreported, list_markers

Clock = Callable[[], int]
T = TypeVar("T")


class Plan(Protocol):
    def dumps(self) -> bytes: ...


P = TypeVar("P", bound=Plan)


def pending_of(store: TimelineStore, timeline: Timeline, action: Action) -> list[Instant]:
    """The service's instants requested or inflight and not claimed by a rollback (a pending
    replacecommit that is an overwrite is a write, not a clustering)."""
    claimed = claimed_by_rollbacks(store, timeline)
    return [i for i in timeline.pending if i.action == action and i.requested_time not in claimed
            and pending_overwrite(store, i) is None]


def schedule(storage: Storage, lock: Lock, action: Action, name: str, command: str,
             make_plan: Callable[[str, Timeline], P | None], pending_error: type[LakecoreError], *,
             config_name: str, clock: Clock) -> P | None:
    """Under the lock: refuse while one of the service's instants is pending, draw P after every
    completion on the timeline (so everything the plan names precedes it), plan over that timeline,
    and record `P.<action>.requested` with the plan. None (nothing recorded) when there is nothing
    to do."""
    store = TimelineStore(storage)
    with lock:
        timeline = store.load()
        pending = pending_of(store, timeline, action)
        if pending:
            t, state = pending[0].requested_time, pending[0].state.name.lower()
            raise pending_error(
                f"{name} {t} is already {state} on table {config_name!r}; if the process running it "
                f"died, finish it (`weir table {command} --resume`, run_{name}) or drop it "
                f"(`weir table rollback URI {t}`, rollback_{name}) first")
        p = next_instant_time(clock(), timeline.newest_time())
        plan = make_plan(p, timeline)
        if plan is None:
            return None
        store.create_requested(Instant(p, action), plan.dumps())
    return plan


@dataclass(frozen=True)
class Running:
    """A service instant being executed: what the driver hands to the tasks and back to commit.
    Pickles for tasks without `run` (the claim and its heartbeat stay on the driver)."""

    timeline: Timeline
    inflight: Instant
    config: TableConfig      # the table schema as recorded before the plan: tasks must use this
    attempt: int = 1         # the run's claim attempt (liveness.runs)
    run: ServiceRun | None = field(default=None, compare=False, repr=False)

    def tokens(self, n: int) -> list[str]:
        """Write tokens for the plan's n operations: unique per operation and per run attempt."""
        return [f"{i}-{self.attempt}-0" for i in range(n)]

    def release(self) -> None:
        if self.run is not None:
            self.run.release()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "run": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def delete_partial_files(storage: Storage, instant_time: str) -> None:
    """Delete the data files an earlier attempt of the instant wrote (named by its markers)."""
    for m in list_markers(storage, instant_time):
        storage.delete(m.data_path)
    delete_markers(storage, instant_time)


def schema_as_of_plan(store: TimelineStore, timeline: Timeline, config: TableConfig,
                      plan_instant: str) -> TableConfig:
    """The config with the table schema recorded before P: it covers every column of the planned
    files even when the caller's config is stale."""
    recorded = store.latest_schema(timeline.as_of(plan_instant))
    return config.with_committed_schema(schema_from_json(recorded)) if recorded else config


def resume(storage: Storage, store: TimelineStore, config: TableConfig, instant_time: str, action: Action,
           name: str, lock: Lock, heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT) -> Instant | Running:
    """The completed instant, or the pending one claimed for this process (ServiceRunning while a
    live run holds it), moved inflight and cleared of what dead attempts wrote."""
    current = store.load().find(instant_time)
    if current is None or not current.is_completed:  # a completed instant stays so: no lock needed
        claimed = _claim(storage, store, lock, instant_time, action, name, heartbeat)
        if isinstance(claimed, tuple):
            timeline, current, run = claimed
            try:
                delete_partial_files(storage, instant_time)  # dead attempts' files: nobody writes any more
                inflight = store.transition_inflight(current) if current.state is State.REQUESTED else current
                config = schema_as_of_plan(store, timeline, config, instant_time)
            except BaseException:
                run.release()
                raise
            return Running(timeline, inflight, config, run.attempt, run)
        current = claimed
    delete_markers(storage, instant_time)  # a process killed after completing it may have left them
    forget(storage, instant_time)
    return current


def _claim(storage: Storage, store: TimelineStore, lock: Lock, instant_time: str, action: Action, name: str,
           heartbeat: HeartbeatConfig) -> Instant | tuple[Timeline, Instant, ServiceRun]:
    """Under the lock: the instant if it completed meanwhile, else (timeline, instant, our claim)."""
    with lock:
        timeline = store.load()
        current = timeline.find(instant_time)
        if current is not None and current.is_completed:
            return current
        if current is None or current.action != action or instant_time in claimed_by_rollbacks(
                store, timeline) or is_aborted(storage, instant_time):
            raise InvalidInstantState(f"{name} {instant_time} is not pending on the table ({current}); "
                                      "it was rolled back or never scheduled: schedule a new one")
        return timeline, current, ServiceRun.claim(storage, lock, instant_time, f"{name} {instant_time}",
                                                   heartbeat)


def commit(storage: Storage, lock: Lock, store: TimelineStore, inflight: Instant, name: str,
           metadata: Callable[[Timeline], CommitMetadata | None], clock: Clock, *,
           run: Running | None = None, reported: Iterable[str] | None = None) -> Instant | None:
    """Complete the inflight instant with `metadata(timeline)` (timeline reloaded under the lock);
    None, leaving it inflight, when that returns None. `run`: the claimed run (ServiceRunning if it
    lost its claim); `reported`: the data paths of every task's stats — files of other task attempts
    are deleted first (engines that retry tasks). The claim is released either way."""
    p = inflight.requested_time
    try:
        with lock:
            if run is not None and run.run is not None:
                run.run.ensure_owned(lock, f"completing {name} {p}")
            timeline = store.load()
            now = timeline.find(p)
            if now is None or now.state is not State.INFLIGHT or p in claimed_by_rollbacks(store, timeline) \
                    or is_aborted(storage, p):
                raise InvalidInstantState(f"{name} {p} is no longer inflight ({now}); it was rolled back "
                                          "meanwhile: its files are orphans the rollback removes; schedule "
                                          "anew")
            if reported is not None:  # we own the run: no other attempt writes any more
                delete_unreported(storage, p, reported)
            meta = metadata(timeline)
            if meta is None:
                return None
            completion = next_instant_time(clock(), timeline.newest_time())
            ensure_held(lock, f"completing {name} {p}")
            done = store.complete(inflight, completion, meta)
    finally:
        if run is not None:
            run.release()
    delete_markers(storage, p)
    forget(storage, p)
    return done


def run_tasks(fn: Callable[..., T], args: Sequence[tuple[object, ...]], workers: int, name: str) -> list[T]:
    """fn(*a) for every a, in order; on a thread pool of `workers` when there is more than one."""
    if workers <= 1 or len(args) <= 1:
        return [fn(*a) for a in args]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"weir-{name}") as pool:
        return [f.result() for f in [pool.submit(fn, *a) for a in args]]


def rollback_pending(storage: Storage, lock: Lock, instant_time: str, action: Action, name: str,
                     hint: str, *, clock: Clock, force: bool = False,
                     heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT) -> Instant | None:
    """Drop a pending instant of the service: delete its files (named by its markers), record a
    rollback, remove the requested/inflight instant. ServiceRunning while a live run executes it
    (unless `force`); None when a rollback already claimed it."""
    target = TimelineStore(storage).load().get(instant_time)
    if target.action != action:
        raise InvalidInstantState(f"instant {instant_time} is a {target.action}, not a {name}; {hint}")
    if target.is_completed:
        raise InvalidInstantState(f"{name} {instant_time} is completed; undo it with Table.rollback "
                                  "(only while it is the latest write) or restore a savepoint")
    done = rollback_write(storage, lock, target, clock=clock, refuse_live=None if force else heartbeat)
    forget(storage, instant_time)
    return done
