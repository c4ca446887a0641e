"""The write protocol: start an instant, let tasks write, complete it under the lock — or roll back.

    begin:    lock -> reload timeline -> draw instant time -> create requested -> unlock -> inflight
    tasks:    write files (one marker before each)                       [write.file_writer]
    commit:   lock -> reload timeline -> conflict check [occ] -> draw completion time ->
              still hold lock? -> create completed instant -> unlock -> delete markers
              (on a conflict: unlock -> roll our instant back -> raise WriteConflict)
    rollback: delete the files named by the instant's markers, then record a rollback instant

The lock is held only for the short critical sections. Anything that fails before the completed
instant file exists leaves the instant pending and its files invisible to readers.

An overwrite (insert_overwrite, insert_overwrite_table) is a `replacecommit` whose requested body is
its scope (timeline.overwrite); its tasks write new base files named with its instant time (for
groups of the scope without input rows: empty ones), which supersede the replaced slices when it
completes, as a clustering's do. Its conflict rules are occ.overwrite_conflicts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from lakecore.concurrency.conflicts.occ import (
    Conflict,
    completed_since,
    find_conflicts,
    needs_check,
    overwrite_conflicts,
)
from lakecore.concurrency.conflicts.schema import (
    complete_writer_schema,
    evolution_problems,
    resolve_schema,
)
from lakecore.concurrency.liveness.heartbeat import is_aborted
from lakecore.concurrency.locks.protocol import Lock, ensure_held
from lakecore.concurrency.rollback import claimed_by_rollbacks, rollback_write
from lakecore.config import TableConfig, schema_from_json, schema_to_json
from lakecore.errors import (
    CorruptTimeline,
    InvalidInput,
    InvalidInstantState,
    SchemaConflict,
    SchemaMismatch,
    WriteConflict,
)
from lakecore.layout import FileSlice, FileSystemView, build_view
from lakecore.storage import Storage
from lakecore.timeline import (
    Action,
    CommitMetadata,
    Instant,
    OverwriteScope,
    State,
    Timeline,
    TimelineStore,
    WriteStat,
    next_instant_time,
    now_ms,
    pending_overwrites,
)
from lakecore.write import OVERWRITES, Operation, WriteContext, check_operation, delete_markers

Clock = Callable[[], int]
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteTransaction:
    """A started write: the inflight instant plus what the writer saw when it started."""

    storage: Storage
    config: TableConfig
    instant: Instant
    operation: Operation
    started_after: Instant | None            # last completed instant at start (for conflict checks)
    slices: dict[tuple[str, str], FileSlice] = field(default_factory=dict)
    schema_at_start: pa.Schema | None = None  # the table's schema when the write started
    scope: OverwriteScope | None = None       # what an overwrite replaces (None: not an overwrite)

    def context(self, write_token: str = "0-0-0", **options: Any) -> WriteContext:
        """What a task needs to write file groups (pickles); options: markers, max_rows_per_file."""
        return WriteContext(self.storage, self.config, self.instant.requested_time, self.operation,
                            self.slices, write_token, **options)


def draw_instant(store: TimelineStore, lock: Lock, action: Action, *, plan: bytes = b"",
                 clock: Clock = now_ms) -> tuple[Instant, Timeline]:
    """Create a requested instant with a fresh time; returns it and the timeline it was drawn from."""
    with lock:
        timeline = store.load()
        t = next_instant_time(clock(), timeline.newest_time())
        instant = store.create_requested(Instant(t, action), plan)
    return instant, timeline


def begin_write(storage: Storage, config: TableConfig, lock: Lock, operation: Operation, *,
                clock: Clock = now_ms, need_view: bool = False,
                table_schema: pa.Schema | None = None,
                partitions: Iterable[str] | None = None) -> WriteTransaction:
    """Start a write. `config.schema` is the writer's schema; `table_schema` the table's as the writer
    knows it (they differ when the write evolves the schema; default: the same). `partitions`: the
    partition paths an insert_overwrite replaces (those its input touches). Raises UnknownOperation
    before anything exists for an operation lakecore does not have."""
    operation = check_operation(operation)
    scope = _scope(operation, partitions)
    store = TimelineStore(storage)
    action: Action = "deltacommit" if config.table_type == "merge_on_read" else "commit"
    if scope is not None:
        action, need_view = "replacecommit", True  # the view says which groups the scope holds
    requested, timeline = draw_instant(store, lock, action, plan=scope.dumps() if scope else b"",
                                       clock=clock)
    try:  # never write on top of an instant file that does not parse (metadata is cached: cheap)
        store.verify(timeline)
    except CorruptTimeline:
        store.abandon_requested(requested)  # nothing refers to it yet: leave no trace
        raise
    inflight = store.transition_inflight(requested)
    slices = build_view(timeline, store.metadata).as_dict() if need_view else {}
    recorded = store.latest_schema(timeline)
    at_start = schema_from_json(recorded) if recorded else (table_schema or config.schema)
    return WriteTransaction(storage, config, inflight, operation, timeline.last_completed(), slices, at_start,
                            scope)


def _scope(operation: Operation, partitions: Iterable[str] | None) -> OverwriteScope | None:
    if operation not in OVERWRITES:
        return None
    if operation == "insert_overwrite" and partitions is None:
        raise InvalidInput("insert_overwrite replaces the partitions its input touches, and none were "
                           "given; pass `partitions` (the input's partition paths) to begin_write")
    return OverwriteScope.of(operation, partitions or ())


def replaced_groups(txn: WriteTransaction, written: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The file groups of an overwrite's scope, as of its start, that got no rows: each needs an
    empty base file, so that its old slice is replaced too (sorted; empty for other writes)."""
    if txn.scope is None:
        return []
    done = set(written)
    return sorted(g for g, s in txn.slices.items() if txn.scope.covers(g[0]) and g not in done and s.files)


def _decide_schema(txn: WriteTransaction, store: TimelineStore, timeline: Timeline) -> pa.Schema:
    """The schema to commit (concurrent schema evolution, conflicts/schema.py) or SchemaConflict. A
    writer lacking nullable columns the table had at its start writes the old schema: its rows read
    them as null (complete_writer_schema), it does not drop them."""
    at_start = txn.schema_at_start or txn.config.schema
    recorded = store.latest_schema(timeline)
    at_validation = schema_from_json(recorded) if recorded else at_start
    writer = complete_writer_schema(at_start, txn.config.schema)
    decision = resolve_schema(at_start, at_validation, writer)
    problems = evolution_problems(at_start, writer) if decision.case == 5 else []
    if problems:
        raise SchemaConflict(f"write {txn.instant.requested_time} changes the table schema beyond adding "
                             f"nullable columns: {'; '.join(problems)}; only additive evolution is "
                             "supported: write every column the table has (nullable ones may be left "
                             "out) with its type, and add only nullable columns")
    return decision.schema


def commit_write(txn: WriteTransaction, stats: Sequence[WriteStat], *, extra: dict[str, Any] | None = None,
                 lock: Lock, clock: Clock = now_ms, alive: Callable[[], None] | None = None) -> Instant:
    """Complete the instant under the lock after the conflict check; on a conflict, roll it back and
    raise WriteConflict (nothing of the write is visible). `alive`: the writer's own liveness check
    (e.g. Heartbeat.check), run under the lock right before completing: a writer that lost its
    heartbeat while waiting for the lock must not complete an instant others may be rolling back.

    Every writer waits on the lock, so what can happen before it does: the completed file's bytes
    are written and synced ahead (for the schema the write commits unless a concurrent write changed
    the table's meanwhile, which the lock re-decides), leaving the lock a link; the link's directory
    entry is synced after the release and before this returns. A writer that acts on our completion
    before that sync completes an instant in the same directory, and syncing that directory makes our
    entry durable too: nothing durable can depend on a completion a power loss could take back."""
    store = TimelineStore(txn.storage)
    base_groups = frozenset((s.partition, s.file_id) for s in stats if s.kind == "base")
    conflicts: list[Conflict] = []
    refused: SchemaConflict | None = None
    groups = frozenset((s.partition, s.file_id) for s in stats)
    recorded = dict(extra or {})
    if txn.scope is not None:
        recorded["overwrite"] = txn.scope.to_json()
    guess = _schema_guess(txn)
    ahead = store.stage_completion(_metadata(txn, stats, guess, recorded)) if guess is not None else None
    published = False
    try:
        with lock:
            timeline = store.load()
            current = timeline.find(txn.instant.requested_time)
            if current is None or current.state is not State.INFLIGHT or \
                    txn.instant.requested_time in claimed_by_rollbacks(store, timeline) or \
                    is_aborted(txn.storage, txn.instant.requested_time):
                raise InvalidInstantState(f"instant {txn.instant.requested_time} is no longer inflight "
                                          f"({current}) or was marked aborted; it was rolled back (its "
                                          "heartbeat had expired?): rerun the write")
            if alive is not None:
                alive()
            try:
                schema = _decide_schema(txn, store, timeline)
            except SchemaConflict as exc:
                refused = exc
            if refused is None:
                conflicts = _conflicts(txn, timeline, store, groups, base_groups)
            if refused is None and not conflicts:
                meta = _metadata(txn, stats, schema, recorded)
                staged = ahead if guess is not None and schema_to_json(guess) == meta.schema else None
                completion = next_instant_time(clock(), timeline.newest_time())
                ensure_held(lock, f"completing instant {txn.instant.requested_time}")
                done = store.complete(txn.instant, completion, meta, staged=staged, sync=staged is None)
                published = staged is not None
    finally:
        if ahead is not None and not published:
            ahead.discard()
    if published and ahead is not None:
        ahead.sync()  # durable before anyone is told (see above)
    if refused is not None or conflicts:
        rollback_write(txn.storage, lock, txn.instant, clock=clock)
        if refused is not None:
            raise refused
        raise WriteConflict.of(txn.instant.requested_time, conflicts)
    try:
        delete_markers(txn.storage, txn.instant.requested_time)
    except Exception as exc:  # the write is complete; leftover markers of a completed instant are inert
        log.warning("write %s completed, but deleting its markers failed (%s); they are inert (only "
                    "pending instants' markers are read)", txn.instant.requested_time, exc)
    return done


def _metadata(txn: WriteTransaction, stats: Sequence[WriteStat], schema: pa.Schema,
              recorded: dict[str, Any]) -> CommitMetadata:
    return CommitMetadata(txn.operation, tuple(stats), schema_to_json(schema), recorded,
                          table=recorded_config(txn.config))


def _schema_guess(txn: WriteTransaction) -> pa.Schema | None:
    """The schema the commit will decide if nobody changed the table's since the write started (the
    common case), to write the completed file ahead of the lock; None if the write itself is refused."""
    at_start = txn.schema_at_start or txn.config.schema
    writer = complete_writer_schema(at_start, txn.config.schema)
    try:
        decision = resolve_schema(at_start, at_start, writer)
    except (SchemaConflict, SchemaMismatch):
        return None
    if decision.case == 5 and evolution_problems(at_start, writer):
        return None
    return decision.schema


def recorded_config(config: TableConfig) -> dict[str, Any]:
    """What a write records of the table's config (all but the schema, recorded beside it), so a lost
    table.json can be recreated from the timeline (`weir table repair`)."""
    return {k: v for k, v in config.to_json().items() if k != "schema"}
def _conflicts(txn: WriteTransaction, timeline: Timeline, store: TimelineStore,
               groups: frozenset[tuple[str, str]], base_groups: frozenset[tuple[str, str]]) -> list[Conflict]:
    """OCC: every group we wrote; NBCC: base files against base writers, logs against overwrites
    only; an overwrite: everything written into its scope, in either mode (conflicts/occ.py)."""
    mode = txn.config.concurrency_mode
    if mode == "single_writer":
        return []
    since = completed_since(timeline, txn.instant)
    if txn.scope is not None:
        later_compactions = [i for i in timeline.completed if i.action == "compaction"
                             and i.requested_time > txn.instant.requested_time]
        return overwrite_conflicts(txn.instant, txn.scope, since + later_compactions, store.metadata)
    if needs_check(mode, bool(base_groups)):
        only_bases = mode == "non_blocking"
        return find_conflicts(txn.instant, base_groups if only_bases else groups, since, store.metadata,
                              only_base_writers=only_bases, our_base_groups=base_groups,
                              overwritable=groups)
    overwrites = [i for i in since if i.action == "replacecommit"]
    return find_conflicts(txn.instant, groups, overwrites, store.metadata, only_overwrites=True)


def view_of(storage: Storage, timeline: Timeline) -> FileSystemView:
    return build_view(timeline, TimelineStore(storage).metadata)


def view_for_services(storage: Storage, timeline: Timeline) -> FileSystemView:
    """The view a table service plans over: without the partitions pending overwrites replace (a
    base the service wrote there would be newer than the overwrite's and bring the old rows back)."""
    store = TimelineStore(storage)
    view = build_view(timeline, store.metadata)
    scopes = [s for _, s in pending_overwrites(store, timeline)]
    if not scopes:
        return view
    return FileSystemView(tuple(s for s in view.slices if not any(sc.covers(s.partition) for sc in scopes)))
