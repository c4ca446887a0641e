"""Table maintenance in one place: `table.maintenance.compact()`, `cluster()`, `clean()`, `archive()`,
`rollback()`, `restore()` and `savepoint()`, each returning one `MaintenanceResult`.

The dry-run rule: **what deletes data is a dry run unless told.** `clean`, `rollback` and `restore`
delete data files, so by default they only return their plan; pass `dry_run=False` to act. `compact`,
`cluster`, `archive` and `savepoint` delete no data (compaction and clustering write new base files
beside the old ones, which only a clean removes; archival moves completed instants into the history;
a savepoint pins files), so they act unless given `dry_run=True`.

A facade over lakecore.services: it picks the service, passes the table's storage, config, lock and
heartbeat, and puts what the service returned (a plan, an instant, an archival result, or nothing to
do) into the one result shape. No decisions of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, TypeVar

from lakecore.concurrency import rollback_write, view_for_services
from lakecore.concurrency.rollback import completion_lost, live_runner
from lakecore.errors import InstantArchived, InstantNotFound, InvalidInstantState
from lakecore.publish import published_since
from lakecore.services import (
    ArchivalPlan,
    ArchivalPolicy,
    ArchivalResult,
    CleanPlan,
    CleanPolicy,
    ClusteringPlan,
    ClusteringStrategy,
    CompactionPlan,
    CompactionStrategy,
    Savepoint,
    UndoPlan,
    create_savepoint,
    delete_savepoint,
    list_savepoints,
    load_clustering_plan,
    pending_clusterings,
    pending_compactions,
    plan_clustering,
    plan_compaction,
    restore,
    rollback_completed,
    run_archival,
    run_clean,
    run_clustering,
    run_compaction,
    schedule_clustering,
    schedule_compaction,
)
from lakecore.services.compaction import load_plan
from lakecore.timeline import Instant, now_ms, requested_time_of
from lakecore.write import list_markers

if TYPE_CHECKING:
    from lakecore.table.table import Table

MaintenanceAction = Literal["compaction", "clustering", "clean", "archival", "rollback", "restore",
                            "savepoint"]
Plan = CompactionPlan | ClusteringPlan | CleanPlan | ArchivalPlan | UndoPlan | Savepoint
# the actions whose dry run is the default: they delete data files
DELETES_DATA: frozenset[MaintenanceAction] = frozenset({"clean", "rollback", "restore"})


@dataclass(frozen=True)
class MaintenanceResult:
    """What one maintenance operation did, or on a dry run would do.

    `plan`: what it would do (a dry run) or, where the service says, what it did; None when nothing
    was due. `instant`: the completed instant that records what was done (compaction, replacecommit,
    clean, rollback, restore, savepoint); a dry run has one only when the work was done already (a
    rollback finished before, an instant savepointed before). `archived`: archival's outcome (it records
    no instant)."""

    action: MaintenanceAction
    dry_run: bool
    plan: Plan | None = None
    instant: Instant | None = None
    archived: ArchivalResult | None = None
    # an undo (rollback, restore): the published snapshots that read files it deletes (or deleted)
    published: tuple[str, ...] = ()

    @property
    def done(self) -> bool:
        """The table is as the operation leaves it: it ran now, or had run before."""
        return self.instant is not None or self.archived is not None

    @property
    def nothing_to_do(self) -> bool:
        """Nothing was due: no plan (an archival plan without instants counts as none) and nothing done."""
        if self.done:
            return False
        return self.plan is None or (isinstance(self.plan, ArchivalPlan) and not self.plan.instants)


def _result(action: MaintenanceAction, dry_run: bool,
            value: Plan | Instant | ArchivalResult | None) -> MaintenanceResult:
    """A service's answer, whichever of its shapes, as the result."""
    if isinstance(value, Instant):
        return MaintenanceResult(action, dry_run, instant=value)
    if isinstance(value, ArchivalResult):
        return MaintenanceResult(action, dry_run, archived=value)
    return MaintenanceResult(action, dry_run, plan=value)


P = TypeVar("P", CompactionPlan, ClusteringPlan)
S = TypeVar("S", CompactionStrategy, ClusteringStrategy, CleanPolicy)


def _given(value: S | str | None, kind: type[S], name: str) -> S:
    """A strategy or policy as given, its kind alone (`compact("log_count")`), or the default."""
    if value is None:
        return kind()
    if isinstance(value, str):
        return kind(value)   # type: ignore[arg-type]  # the kind checks its name, with a did-you-mean
    if not isinstance(value, kind):
        raise TypeError(f"{name} is a {kind.__name__} (or the name of its kind), not "
                        f"{type(value).__name__} {value!r}")
    return value


def _rewrite(action: MaintenanceAction, dry_run: bool, resume: bool, pending: Callable[[], P | None],
             planned: Callable[[], P | None], scheduled: Callable[[], P | None],
             run: Callable[[P], Instant | None]) -> MaintenanceResult:
    """A service that rewrites file slices (compaction, clustering): resume the pending run (dry run or
    not: resuming is what was asked), show the plan, or schedule and run."""
    if dry_run and not resume:
        return MaintenanceResult(action, True, planned())
    plan = pending() if resume else scheduled()
    if plan is None:
        return MaintenanceResult(action, False)
    return MaintenanceResult(action, False, plan, run(plan))


class Maintenance:
    """The maintenance operations of one table (`Table.maintenance`); see the module docstring for the
    dry-run rule. Every operation runs under the table's lock and heartbeat settings."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def compact(self, strategy: CompactionStrategy | str | None = None, *, dry_run: bool = False,
                resume: bool = False) -> MaintenanceResult:
        """Merge file slices' log files into new base files (merge-on-read); the old files stay until a
        clean. `resume`: finish the compaction a dead process left pending instead (only when no process
        is running it: resuming deletes what it wrote so far)."""
        t, chosen = self.table, _given(strategy, CompactionStrategy, "strategy")

        def pending() -> CompactionPlan | None:
            found = pending_compactions(t._store, t.timeline())
            return load_plan(t.storage, found[0].requested_time) if found else None

        def planned() -> CompactionPlan | None:
            ops = plan_compaction(view_for_services(t.storage, t.timeline()), t.config, chosen)
            return CompactionPlan("", ops, chosen.kind) if ops else None

        return _rewrite("compaction", dry_run, resume, pending, planned,
                        lambda: schedule_compaction(t.storage, t.config, t.lock, chosen),
                        lambda plan: run_compaction(t.storage, t.config, t.lock, plan,
                                                    heartbeat=t.options.heartbeat))

    def cluster(self, strategy: ClusteringStrategy | str | None = None, *, dry_run: bool = False,
                resume: bool = False) -> MaintenanceResult:
        """Rewrite file groups' latest slices into one base file each, sorted by `strategy.sort_columns`
        (copy-on-write and merge-on-read; a replacecommit); the old files stay until a clean. `resume`:
        finish the clustering a dead process left pending instead (only when no process is running it)."""
        t, chosen = self.table, _given(strategy, ClusteringStrategy, "strategy")

        def pending() -> ClusteringPlan | None:
            found = pending_clusterings(t._store, t.timeline())
            return load_clustering_plan(t.storage, found[0].requested_time) if found else None

        def planned() -> ClusteringPlan | None:
            ops = plan_clustering(view_for_services(t.storage, t.timeline()), t.config, chosen)
            return ClusteringPlan("", ops, chosen) if ops else None

        return _rewrite("clustering", dry_run, resume, pending, planned,
                        lambda: schedule_clustering(t.storage, t.config, t.lock, chosen),
                        lambda plan: run_clustering(t.storage, t.config, t.lock, plan,
                                                    heartbeat=t.options.heartbeat))

    def clean(self, policy: CleanPolicy | str | None = None, *, dry_run: bool = True) -> MaintenanceResult:
        """Delete the files no retained read needs, after rolling back dead writes. Deletes data, so a
        dry run (the plan) unless `dry_run=False`; then `instant` is the completed clean (its commit
        metadata lists what it deleted)."""
        t = self.table
        return _result("clean", dry_run, run_clean(t.storage, t.config, t.lock,
                                                   _given(policy, CleanPolicy, "policy"),
                                                   dry_run=dry_run, heartbeat=t.options.heartbeat))

    def archive(self, policy: ArchivalPolicy | None = None, *, dry_run: bool = False) -> MaintenanceResult:
        """Move the oldest completed instants into the archived timeline (see services.archive); reads
        keep working across it. `archived` says what moved; a dry run's plan may hold no instant and
        say what stopped it."""
        t = self.table
        return _result("archival", dry_run, run_archival(t.storage, t.lock, policy, dry_run=dry_run,
                                                         heartbeat=t.options.heartbeat))

    def savepoint(self, instant_time: str | Instant, *, comment: str = "", dry_run: bool = False
                  ) -> MaintenanceResult:
        """Pin a completed write instant (an Instant or its requested time): clean keeps its files,
        restore can return to it. A dry run's plan is the Savepoint it would record (the files it pins)."""
        t = self.table
        instant_time = requested_time_of(instant_time)
        return _result("savepoint", dry_run, create_savepoint(t.storage, t.lock, instant_time,
                                                              comment=comment, dry_run=dry_run))

    def savepoints(self) -> list[Savepoint]:
        """The live savepoints, oldest first: each one's instant, the write it pins, the files it keeps."""
        return list_savepoints(self.table.storage)

    def delete_savepoint(self, savepoint: str | Instant | Savepoint) -> MaintenanceResult:
        """Let a savepoint go (as `savepoints()` lists it, by its instant, or the write it pins): clean
        may delete the files it kept, and the writes it pinned can be rolled back. Recorded as a
        savepoint instant naming it."""
        t = self.table
        return _result("savepoint", False, delete_savepoint(t.storage, t.lock, _savepoint_time(savepoint)))

    def restore(self, savepoint: str | Instant | Savepoint, *, dry_run: bool = True) -> MaintenanceResult:
        """Make the table read as at a savepoint (as `savepoints()` lists it, its instant, or that
        instant's requested time), undoing everything completed after it. Deletes data, so a dry run (the
        plan) unless `dry_run=False`."""
        t = self.table
        savepoint = _savepoint_time(savepoint)
        published = published_since(t.storage, savepoint, inclusive=False)
        return replace(_result("restore", dry_run, restore(t.storage, t.config, t.lock, savepoint,
                                                           dry_run=dry_run, heartbeat=t.options.heartbeat)),
                       published=published)

    def rollback(self, instant_time: str | Instant, *, dry_run: bool = True, force: bool = False,
                 expect: Literal["pending", "completed"] | None = None) -> MaintenanceResult:
        """Roll back a write instant: a pending one (its files deleted), or a completed one no later base
        file builds on (see lakecore.services.undo.rollback_completed). Deletes data, so a dry run (the
        plan: the instant and the data files it would delete) unless `dry_run=False`. A pending instant
        whose writer is alive (fresh heartbeat; a table service's live run) is refused with WriterLive
        (ServiceRunning) unless `force`. `expect`: the state the caller saw; if the instant is no longer
        in it (a pending write completed meanwhile), InvalidInstantState and nothing changes — the
        rollback itself re-checks the state under the table lock. An instant rolled back already (also
        by a rollback whose process died, which this finishes) gives that rollback's instant. The instant:
        an Instant or its requested time."""
        t = self.table
        instant_time = requested_time_of(instant_time)
        try:
            instant = t.timeline().get(instant_time)
        except InstantArchived:
            raise
        except InstantNotFound:  # undone already, or by a rollback whose process died: finish, return it
            instant = None
        state = "pending" if instant is not None and not instant.is_completed else "completed"
        if expect is not None and instant is not None and state != expect:
            raise InvalidInstantState(f"instant {instant_time} is {state} now, not {expect} as when you "
                                      f"looked ({instant}); look again (`weir table timeline`) and decide "
                                      "anew")
        if instant is None or instant.is_completed:
            published = published_since(t.storage, instant_time) if instant is not None else ()
            return replace(_result("rollback", dry_run, rollback_completed(
                t.storage, t.config, t.lock, instant_time, heartbeat=t.options.heartbeat, dry_run=dry_run)),
                published=published)
        if dry_run:
            written = tuple(sorted(m.data_path for m in list_markers(t.storage, instant_time))) \
                or completion_lost(t.storage, instant)   # its completed file lost: no marker names them
            live = None if force else live_runner(t.storage, instant, now_ms(), t.options.heartbeat)
            return MaintenanceResult("rollback", True, UndoPlan("rollback", (instant.file_name,), written,
                                                                live=live))
        refuse = None if force else t.options.heartbeat
        done = rollback_write(t.storage, t.lock, instant, refuse_live=refuse, drop_lost=True,
                              by="Table.rollback (forced)" if force else "Table.rollback")
        if done is None:
            raise InvalidInstantState(f"instant {instant_time} is already being rolled back")
        return MaintenanceResult("rollback", False, instant=done)


def _savepoint_time(savepoint: str | Instant | Savepoint) -> str:
    return savepoint.instant_time if isinstance(savepoint, Savepoint) else requested_time_of(savepoint)
