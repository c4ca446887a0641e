"""The run protocol shared by the services that rewrite file slices (compaction, clustering).

    resume:   reload -> completed already? (delete the markers a dead process left, return it)
              -> still pending and not claimed by a rollback? -> delete what an earlier attempt wrote
              (through its markers) -> move it inflight
    execute:  one task per planned operation, on a thread pool (`run_tasks`)
    commit:   lock -> reload -> still inflight and ours? -> metadata (None: the service declines,
              e.g. a clustering that lost a conflict) -> complete -> unlock -> delete markers
    rollback: only a pending instant of the service's own action, through concurrency.rollback

A service supplies its action, its name for messages, and what its commit records.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol, TypeVar

from lakecore.concurrency import Lock, ensure_held, rollback_write
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
from lakecore.write import delete_markers, list_markers

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
    """A service instant being executed: what the driver hands to the tasks and back to commit."""

    timeline: Timeline
    inflight: Instant
    config: TableConfig      # the table schema as recorded before the plan: tasks must use this

    def tokens(self, n: int) -> list[str]:
        """Write tokens for the plan's n operations (file names stay unique per operation)."""
        return [f"{i}-0-0" for i in range(n)]


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
    return config.with_schema(schema_from_json(recorded)) if recorded else config


def resume(storage: Storage, store: TimelineStore, config: TableConfig, instant_time: str, action: Action,
           name: str) -> Instant | Running:
    """The completed instant, or the pending one moved inflight and cleared of partial files."""
    timeline = store.load()
    current = timeline.find(instant_time)
    if current is not None and current.is_completed:
        delete_markers(storage, instant_time)  # a process killed after completing it may have left them
        return current
    if current is None or current.action != action or instant_time in claimed_by_rollbacks(store, timeline):
        raise InvalidInstantState(f"{name} {instant_time} is not pending on the table ({current}); it was "
                                  "rolled back or never scheduled: schedule a new one")
    delete_partial_files(storage, instant_time)
    inflight = store.transition_inflight(current) if current.state is State.REQUESTED else current
    return Running(timeline, inflight, schema_as_of_plan(store, timeline, config, instant_time))


def commit(storage: Storage, lock: Lock, store: TimelineStore, inflight: Instant, name: str,
           metadata: Callable[[Timeline], CommitMetadata | None], clock: Clock) -> Instant | None:
    """Complete the inflight instant with `metadata(timeline)` (timeline reloaded under the lock);
    None, leaving it inflight, when that returns None."""
    p = inflight.requested_time
    with lock:
        timeline = store.load()
        now = timeline.find(p)
        if now is None or now.state is not State.INFLIGHT or p in claimed_by_rollbacks(store, timeline):
            raise InvalidInstantState(f"{name} {p} is no longer inflight ({now}); it was rolled back "
                                      "meanwhile: its files are orphans the rollback removes; schedule anew")
        meta = metadata(timeline)
        if meta is None:
            return None
        completion = next_instant_time(clock(), timeline.newest_time())
        ensure_held(lock, f"completing {name} {p}")
        done = store.complete(inflight, completion, meta)
    delete_markers(storage, p)
    return done


def run_tasks(fn: Callable[..., T], args: Sequence[tuple[object, ...]], workers: int, name: str) -> list[T]:
    """fn(*a) for every a, in order; on a thread pool of `workers` when there is more than one."""
    if workers <= 1 or len(args) <= 1:
        return [fn(*a) for a in args]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"weir-{name}") as pool:
        return [f.result() for f in [pool.submit(fn, *a) for a in args]]


def rollback_pending(storage: Storage, lock: Lock, instant_time: str, action: Action, name: str,
                     hint: str, *, clock: Clock) -> Instant | None:
    """Drop a pending instant of the service: delete its files (named by its markers), record a
    rollback, remove the requested/inflight instant. None when a rollback already claimed it."""
    target = TimelineStore(storage).load().get(instant_time)
    if target.action != action:
        raise InvalidInstantState(f"instant {instant_time} is a {target.action}, not a {name}; {hint}")
    if target.is_completed:
        raise InvalidInstantState(f"{name} {instant_time} is completed; undo it with Table.rollback "
                                  "(only while it is the latest write) or restore a savepoint")
    return rollback_write(storage, lock, target, clock=clock)
