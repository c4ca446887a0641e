"""`weir table compact|cluster|clean|savepoint|restore|rollback|archive|repair`: maintain a table.

What deletes data is a dry run unless told: clean, restore and repair show their plan unless --run,
rollback unless --yes (on a terminal it asks); compact, cluster, archive and savepoint delete nothing
and run unless --dry-run. Each command calls `Table.maintenance` (or the repair service) and hands the
MaintenanceResult to its output.
"""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from lakecore.cli.app import JsonFlag, Uri, friendly, table_app
from lakecore.cli.commands.inspect import HEALTH_CODES
from lakecore.cli.output import output_for
from lakecore.errors import InvalidInput
from lakecore.services import ArchivalPolicy, CleanPolicy, ClusteringStrategy, CompactionStrategy, UndoPlan
from lakecore.table import MaintenanceResult, Table

PlanOnly = Annotated[bool, typer.Option(help="Print the plan, change nothing.")]
RunToDelete = Annotated[bool, typer.Option("--dry-run/--run", help="Only print the plan (the default: it "
                                                                   "deletes data; --run does it).")]


@table_app.command("compact")
@friendly
def compact(uri: Uri,
            strategy: Annotated[str, typer.Option(help="all | log_count | log_size | bounded_io")] = "all",
            min_logs: Annotated[int, typer.Option(help="log_count: slices with at least this many logs")] = 1,
            min_log_bytes: Annotated[int, typer.Option(
                help="log_size: slices whose log files hold at least this many bytes")] = 0,
            io_budget_bytes: Annotated[int, typer.Option(
                help="bounded_io: read about this many bytes, largest logs first")] = 512 << 20,
            dry_run: PlanOnly = False,
            resume: Annotated[bool, typer.Option(help="Finish a compaction a dead process left.")] = False,
            as_json: JsonFlag = False) -> None:
    """Compact merge-on-read file slices (logs merged into new base files; the old ones stay until a
    clean)."""
    chosen = CompactionStrategy(strategy, min_logs=min_logs, min_log_bytes=min_log_bytes,  # type: ignore[arg-type]
                                io_budget_bytes=io_budget_bytes)
    t = Table.open(uri)
    output_for(as_json).compaction(t, t.maintenance.compact(chosen, dry_run=dry_run, resume=resume))


@table_app.command("cluster")
@friendly
def cluster(uri: Uri,
            strategy: Annotated[str, typer.Option(help="small_files | all")] = "small_files",
            sort_columns: Annotated[str | None, typer.Option(
                help="Comma-separated columns to sort each new base file by.")] = None,
            small_file_bytes: Annotated[int, typer.Option(
                help="small_files: bases below this size are rewritten")] = 64 << 20,
            max_groups: Annotated[int | None, typer.Option(
                help="Rewrite at most this many file groups.")] = None,
            dry_run: PlanOnly = False,
            resume: Annotated[bool, typer.Option(help="Finish a clustering a dead process left.")] = False,
            as_json: JsonFlag = False) -> None:
    """Cluster file groups: rewrite each chosen group's latest slice into one (sorted) base file (the old
    files stay until a clean)."""
    cols = tuple(c.strip() for c in sort_columns.split(",") if c.strip()) if sort_columns else ()
    chosen = ClusteringStrategy(strategy, cols, small_file_bytes, max_groups)  # type: ignore[arg-type]
    t = Table.open(uri)
    output_for(as_json).clustering(t, t.maintenance.cluster(chosen, dry_run=dry_run, resume=resume), cols)


@table_app.command("clean")
@friendly
def clean(uri: Uri,
          policy: Annotated[str, typer.Option(
              help="keep_latest_commits|keep_latest_file_versions|keep_by_hours")] = "keep_latest_commits",
          retain: Annotated[int | None, typer.Option(help="commits, versions or hours to keep")] = None,
          dry_run: RunToDelete = True,
          as_json: JsonFlag = False) -> None:
    """Delete files that no retained read needs (dry run unless --run)."""
    t = Table.open(uri)
    chosen = CleanPolicy(policy, retain)  # type: ignore[arg-type]
    output_for(as_json).clean(t, t.maintenance.clean(chosen, dry_run=dry_run))


@table_app.command("savepoint")
@friendly
def savepoint(uri: Uri,
              instant: Annotated[str | None, typer.Argument(help="Completed write instant to pin.")] = None,
              comment: Annotated[str, typer.Option(help="Why this savepoint exists.")] = "",
              dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what it would pin, change "
                                                    "nothing.")] = False,
              list_: Annotated[bool, typer.Option("--list", help="List the live savepoints.")] = False,
              delete: Annotated[str | None, typer.Option(
                  "--delete", metavar="SAVEPOINT", help="Let a savepoint go (its instant, or the write it "
                  "pins): clean may delete its files, the writes it kept may be rolled back.")] = None,
              as_json: JsonFlag = False) -> None:
    """Pin a completed write instant (clean keeps its files; restore can return to it); --list the
    savepoints, --delete one."""
    asked = [what for what, on in (("INSTANT", instant is not None), ("--list", list_),
                                    ("--delete", delete is not None)) if on]
    if len(asked) != 1:
        raise InvalidInput("give one of INSTANT (to pin it), --list or --delete SAVEPOINT" +
                           (f", not {' and '.join(asked)}" if asked else ""))
    m = Table.open(uri).maintenance
    shown = output_for(as_json)
    if list_:
        shown.savepoints(m.savepoints())
    elif delete is not None:
        shown.savepoint_deleted(delete, m.delete_savepoint(delete))
    else:
        assert instant is not None
        shown.savepoint(instant, m.savepoint(instant, comment=comment, dry_run=dry_run))


@table_app.command("restore")
@friendly
def restore(uri: Uri, savepoint: Annotated[str, typer.Argument(help="Savepoint to return to.")],
            dry_run: RunToDelete = True,
            as_json: JsonFlag = False) -> None:
    """Make the table read as at a savepoint (dry run unless --run)."""
    output_for(as_json).restore(savepoint, Table.open(uri).maintenance.restore(savepoint, dry_run=dry_run))


@table_app.command("rollback")
@friendly
def rollback(uri: Uri, instant: Annotated[str, typer.Argument(help="Pending or completed write.")],
             yes: Annotated[bool, typer.Option("--yes", help="Do it (without: show what it would do, or ask "
                                               "on a terminal).")] = False,
             force: Annotated[bool, typer.Option("--force", help="Roll back a pending write even if its "
                                                 "writer looks alive (only when you know its process is "
                                                 "gone).")] = False,
             dry_run: Annotated[bool, typer.Option("--dry-run", help="Only print what it would undo, even "
                                                   "with --yes (without --yes it does that anyway, or asks "
                                                   "on a terminal).")] = False,
             as_json: JsonFlag = False) -> None:
    """Roll back a failed (pending) write, or a completed one not yet compacted; its files are deleted.
    Shows what it would do unless --yes (on a terminal it asks); a completed instant is named as such,
    and the rollback re-checks under the table lock that the instant is still in the state shown."""
    shown = output_for(as_json)
    table = Table.open(uri)
    seen = table.timeline().find(instant)
    state: Literal["pending", "completed"] = "pending" if seen is not None and not seen.is_completed \
        else "completed"
    what = f"{state} instant {instant}" + (f" ({seen.action})" if seen is not None else "")
    looked = table.maintenance.rollback(instant, dry_run=True, force=force)
    if looked.done or dry_run or not (yes or shown.confirm(_question(what, looked))):
        # undone already (a rollback that died half-way was finished), or the plan only
        shown.rollback(instant, looked, state, what)
        return
    shown.rollback(instant, table.maintenance.rollback(instant, dry_run=False, force=force, expect=state),
                   state, what)


def _question(what: str, looked: MaintenanceResult) -> str:
    files = looked.plan.files if isinstance(looked.plan, UndoPlan) else ()
    return f"roll back {what} and delete {len(files)} data file(s)?"


@table_app.command("archive")
@friendly
def archive(uri: Uri,
            min_instants: Annotated[int, typer.Option(help="Completed instants that stay active.")] = 20,
            max_instants: Annotated[int, typer.Option(help="Archive when more are active.")] = 30,
            fanout: Annotated[int, typer.Option(help="History files merged per level.")] = 10,
            dry_run: PlanOnly = False,
            as_json: JsonFlag = False) -> None:
    """Move the oldest completed instants into the archived timeline (reads keep working across it)."""
    policy = ArchivalPolicy(min_instants, max_instants, fanout)
    output_for(as_json).archival(Table.open(uri).maintenance.archive(policy, dry_run=dry_run))


@table_app.command("repair", help="Repair a damaged table (dry run unless --run): rebuild a damaged "
                   "completed instant from its data files (or, when a file it wrote is missing, roll the "
                   "write back, with a warning), recreate a lost table.json from the timeline, fall back "
                   "to an older history manifest, quarantine a damaged plan, write a lost completed "
                   "instant file again when told (--complete-lost). Files it replaces or moves "
                   "aside are kept in .weir/quarantine/. " + HEALTH_CODES)
@friendly
def repair(uri: Uri,
           dry_run: Annotated[bool, typer.Option("--dry-run/--run", help="Only print the plan.")] = True,
           complete_lost: Annotated[list[str] | None, typer.Option(
               "--complete-lost", metavar="INSTANT",
               help="Write the completed instant file of this pending write again: one `weir table check` "
                    "reports as instant_lost and that you know completed (repeatable).")] = None,
           as_json: JsonFlag = False) -> None:
    from lakecore.services.repair import exit_code, repair_lock, run_repair
    from lakecore.storage import open_storage
    storage = open_storage(uri)
    report = run_repair(storage, repair_lock(storage), dry_run=dry_run, complete_lost=complete_lost or ())
    output_for(as_json).repair(report, dry_run)
    code = exit_code(report.remaining)
    if code:
        raise typer.Exit(code)
