"""`weir table` for people: sentences and rich tables on stdout; problems, warnings and errors on stderr.

One method per result kind (the protocol is output.py's). Identifiers (instant times, names, keys)
and numbers are kept whole on any terminal width (cli/tables.py). Plans end with how to carry them out.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import typer
from rich.text import Text

from lakecore.cli.consoles import err, out, say
from lakecore.cli.errors import CliError
from lakecore.cli.io import head_and_count
from lakecore.cli.tables import Col, show_table
from lakecore.config import LockSpec, type_name
from lakecore.services import ArchivalPlan, ClusteringPlan, CompactionPlan, Savepoint, UndoPlan
from lakecore.services.clean_plan import CleanPlan
from lakecore.services.repair import Problem, RepairReport
from lakecore.table import MaintenanceResult, Table, WriteResult
from lakecore.timeline.metadata import counted

if TYPE_CHECKING:
    from lakecore.publish import PublishResult


class TextOutput:
    """Human-readable output."""

    data_format: str | None = None  # `read` shows a table of rows unless a format is asked for

    def error(self, error: CliError) -> None:
        err.print(Text.assemble(("error:", "red"), " ", error.message), soft_wrap=True)

    def confirm(self, question: str) -> bool:
        return sys.stdin.isatty() and typer.confirm(question, default=False)

    # -- configure and write ------------------------------------------------------------------

    def created(self, table: Table) -> None:
        c = table.config
        say(Text.assemble(f"created {c.table_type} table ", (c.name, "bold"),
                          f" at {table.uri} ({c.merge_mode}, {c.buckets} buckets, {c.compression})"))

    def lock_changed(self, table: Table, before: LockSpec, after: LockSpec) -> None:
        say(f"lock of {table.uri}: {before.describe()} -> {after.describe()}")

    def compression_changed(self, table: Table, before: str, after: str) -> None:
        say(f"compression of {table.uri}: {before} -> {after} (files written from now on; files "
            "written before keep theirs)")

    def written(self, operation: str, result: WriteResult, added: Sequence[pa.Field] = ()) -> None:
        say(f"{operation}: {result.counts.describe()} in {counted(result.file_groups, 'file group')}, "
            f"instant {result.instant.requested_time} completed at {result.instant.completion_time}")
        if added:
            say(f"the table gained {counted(len(added), 'column')}: "
                f"{', '.join(f'{f.name} ({f.type})' for f in added)}")

    # -- read and inspect ---------------------------------------------------------------------

    def rows(self, table: Table, data: pa.RecordBatchReader, limit: int) -> None:
        head, total = head_and_count(data, limit)
        keys = {*table.config.record_key, *(c for c in head.column_names if c.startswith("_weir_"))}
        show_table(out, [Col(c, "id" if c in keys else "text") for c in head.column_names],
                   [["null" if v is None else str(v) for v in row.values()] for row in head.to_pylist()],
                   title=f"{table.config.name}: {counted(total, 'row')}")
        if total > limit:
            say(f"... {counted(total - limit, 'more row')} (--limit N shows more; --output FILE or --format "
                "writes them all)")

    def rows_saved(self, rows: int, path: str) -> None:
        say(f"wrote {counted(rows, 'row')} to {path}")

    def timeline(self, table: Table, rows: list[dict[str, Any]], archived: int,
                 archived_listed: bool) -> None:
        title = f"{table.config.name}: {counted(len(rows), 'instant')}"
        if archived and not archived_listed:
            title += f" ({archived} older ones archived: --archived lists them)"
        # narrow: FILE GROUPS goes first, then ACTION (OPERATION, or the action while pending, says more)
        shown = {"instant": Col("INSTANT", "id"), "action": Col("ACTION", drop=1), "state": Col("STATE"),
                 "completed": Col("COMPLETED", "id"), "operation": Col("OPERATION"),
                 "rows_written": Col("ROWS WRITTEN", "number"), "delete_keys": Col("DELETE KEYS", "number"),
                 "file_groups": Col("FILE GROUPS", "number", drop=2)}
        show_table(out, list(shown.values()), [_timeline_cells(r, shown) for r in rows], title=title)
        for r in rows:   # which write each rollback undid (several may follow a crash)
            undone = (r.get("extra") or {}).get("rolled_back")
            if r["action"] == "rollback" and undone:
                out.print(f"rollback {r['instant']} undid {undone}", style="dim", highlight=False)
        if any(r["delete_keys"] for r in rows):
            out.print("DELETE KEYS: the record keys a write deletes; a key whose row the table does not hold "
                      "deletes nothing", style="dim", highlight=False)

    def timeline_picture(self, path: str) -> None:
        sys.stdout.write(f"{path}\n")

    def description(self, table: Table, info: dict[str, Any]) -> None:
        cfg = info["config"]
        say(Text.assemble((cfg["name"], "bold"), f" at {info['uri']}"))
        for label, value in (("type", cfg["table_type"]), ("merge mode", cfg["merge_mode"]),
                             ("record key", ", ".join(cfg["record_key"])),
                             ("partition fields", ", ".join(cfg["partition_fields"]) or "(unpartitioned)"),
                             ("ordering field", cfg["ordering_field"] or "-"), ("buckets", cfg["buckets"]),
                             ("instants", f"{info['instants']['completed']} completed, "
                                          f"{len(info['instants']['pending'])} pending"),
                             ("data", f"{counted(info['files'], 'file')} in "
                                      f"{counted(info['file_groups'], 'file group')}, "
                                      f"{counted(info['partitions'], 'partition')}, "
                                      f"{info['bytes']:,} bytes")):
            say(f"  {label:<17} {value}")
        for g in cfg["column_groups"]:
            say(f"  group {g['name']:<11} {', '.join(g['columns'])} (ordered by {g['ordering_field']})")
        _print_activity(info["activity"])
        say("  schema")
        for f in table.schema:   # the LakeTable's type names
            say(f"    {f.name:<20} {type_name(f.type)}{'' if f.nullable else ' not null'}")

    # -- maintenance --------------------------------------------------------------------------

    def compaction(self, table: Table, result: MaintenanceResult) -> None:
        if result.instant is not None:
            groups = len(table.commit_metadata(result.instant).file_groups)
            say(f"compacted {counted(groups, 'file group')}: instant {result.instant.requested_time}")
        elif isinstance(result.plan, CompactionPlan):
            say(f"would compact {counted(len(result.plan.operations), 'file slice')}:")
            for o in result.plan.operations:
                where = o.partition or "(unpartitioned)"
                say(f"  {o.file_id} in {where}: {counted(len(o.log_files), 'log file')}")
        else:
            say("nothing to compact")

    def clustering(self, table: Table, result: MaintenanceResult, sort_columns: Sequence[str]) -> None:
        if result.instant is not None:
            meta = table.commit_metadata(result.instant)
            say(f"clustered {counted(len(meta.file_groups), 'file group')}: replacecommit "
                f"{result.instant.requested_time}")
        elif isinstance(result.plan, ClusteringPlan):
            by = f", sorted by {', '.join(sort_columns)}" if sort_columns else ""
            say(f"would cluster {counted(len(result.plan.operations), 'file group')}{by}:")
            for o in result.plan.operations:
                say(f"  {o.file_id} in {o.partition or '(unpartitioned)'}: "
                    f"{counted(len(o.paths()), 'file')}, {o.bytes:,} bytes")
        else:
            say("nothing to cluster")

    def clean(self, table: Table, result: MaintenanceResult) -> None:
        if result.instant is not None:
            extra = table.commit_metadata(result.instant).extra
            deleted, rolled = extra.get("deleted", []), extra.get("rolled_back", [])
            also = f", after rolling back {_dead_writes(rolled)}" if rolled else ""
            say(f"clean {result.instant.requested_time}: deleted {counted(len(deleted), 'file')}{also}")
        elif isinstance(result.plan, CleanPlan) and not result.dry_run:   # it only rolled back
            say(f"rolled back {_dead_writes(result.plan.rollbacks)}; no file was due for deletion")
        elif isinstance(result.plan, CleanPlan):
            plan = result.plan
            say(f"would delete {counted(len(plan.files), 'file')} and roll back "
                f"{counted(len(plan.rollbacks), 'dead write')}; run with --run to do it")
            for f in plan.files[:50]:
                say(f"  {f}")
        else:
            say("nothing to clean")

    def savepoint(self, instant: str, result: MaintenanceResult) -> None:
        if result.instant is not None:
            say(f"savepoint {result.instant.requested_time} pins instant {instant}")
        elif isinstance(result.plan, Savepoint):
            say(f"would pin instant {instant} and {counted(len(result.plan.files), 'data file')} it reads")

    def savepoints(self, listed: Sequence[Savepoint]) -> None:
        if not listed:
            say("no savepoints (`weir table savepoint URI INSTANT` pins a write)")
        for s in listed:
            kept = counted(len(s.files), "data file")
            say(f"savepoint {s.instant_time} pins instant {s.savepointed} ({kept})"
                + (f": {s.comment}" if s.comment else ""))

    def savepoint_deleted(self, savepoint: str, result: MaintenanceResult) -> None:
        assert result.instant is not None
        say(f"deleted savepoint {savepoint} (instant {result.instant.requested_time}); clean may delete the "
            "files it kept")

    def restore(self, savepoint: str, result: MaintenanceResult) -> None:
        _published(result)
        if result.instant is not None:
            say(f"restored savepoint {savepoint} (restore instant {result.instant.requested_time})")
        elif isinstance(result.plan, UndoPlan):
            undo = result.plan
            names = [_instant_named(n) for n in undo.undone]
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            say(f"would undo {counted(len(undo.undone), 'instant')} ({shown}) and delete "
                f"{counted(len(undo.files), 'data file')}; run with --run to do it")
        else:
            say("nothing to undo")

    def rollback(self, instant: str, result: MaintenanceResult, state: str, what: str) -> None:
        _published(result)
        if result.instant is not None:
            say(f"rolled back {instant} (rollback instant {result.instant.requested_time})")
        elif isinstance(result.plan, UndoPlan) and result.plan.live:
            files = counted(len(result.plan.files), "data file")
            say(f"would roll back {what} and delete {files}, but it is alive ({result.plan.live}): --yes is "
                "refused until its heartbeat expires (or it commits); add --force only if you know its "
                "process is gone")
        elif isinstance(result.plan, UndoPlan):
            say(f"would roll back {what} and delete {counted(len(result.plan.files), 'data file')}; "
                "rerun with --yes to do it")

    def archival(self, result: MaintenanceResult) -> None:
        done, plan = result.archived, result.plan
        if done is not None:
            levels = ", ".join(f"L{k}: {v}" for k, v in done.levels.items())
            stopped = done.stopped_by
            say(f"archived {counted(done.archived, 'instant')} up to {done.boundary} (history version "
                f"{done.version}; files per level {levels}; {done.live_files} live files)"
                + (f"; stopped by {stopped}" if stopped else ""))
        elif isinstance(plan, ArchivalPlan) and plan.instants:
            say(f"would archive {counted(len(plan.instants), 'instant')}, {plan.instants[0].requested_time} "
                f"to {plan.instants[-1].requested_time}"
                + (f"; stopped by {plan.stopped_by}" if plan.stopped_by else ""))
        else:
            why = plan.stopped_by if isinstance(plan, ArchivalPlan) else None
            say(f"nothing to archive{f' (stopped by {why})' if why else ''}")

    # -- damaged tables -----------------------------------------------------------------------

    def check(self, uri: str, problems: Sequence[Problem], code: int) -> None:
        if not problems:
            say(f"{uri}: no problems found")
        for p in problems:
            say(f"problem: {p.describe()}", stderr=True)

    def repair(self, report: RepairReport, dry_run: bool) -> None:
        if not report.actions:
            say("nothing to repair")
        for a in report.actions:
            say(a.describe())
            if a.warning:
                say(f"warning: {a.warning}", stderr=True)
        if dry_run and report.actions:
            say("run with --run to do it")
        for p in report.remaining if not dry_run else [p for p in report.remaining if not p.repairable]:
            say(f"problem: {p.describe()}", stderr=True)

    def published(self, result: PublishResult) -> None:
        say(result.describe())
        say(f"readers open: {result.location}")
        if result.catalog:
            say(result.catalog)


def _timeline_cells(row: dict[str, Any], keys: Iterable[str]) -> list[str]:
    """A timeline row as shown: a pending instant's operation is its action; an instant that wrote no
    files (a rollback, a clean) shows no counts."""
    shown = {**row, "operation": row["operation"] or row["action"]}
    if not row["file_groups"]:
        shown.update(rows_written=None, delete_keys=None, file_groups=None)
    return ["" if shown[k] is None else f"{shown[k]:,}" if isinstance(shown[k], int) else str(shown[k])
            for k in keys]


def _print_activity(now: dict[str, Any]) -> None:
    lock = now["lock"]
    if lock["provider"] == "storage" and lock["state"] == "held":
        said = f"storage, held by {lock['holder']} (lease {lock['lease_s']:.0f} s"
        if lock["holder_gone"]:
            after = "the next writer breaks it" if lock["breaks_at_once"] else "it frees after its lease"
            said += f"; its process is gone, {after}"
        said += ")"
    elif lock["provider"] == "storage":
        said = "storage, free"
    elif lock["provider"] == "zookeeper":
        said = f"zookeeper at {lock['connect']}{lock['path'] or ''}"
    else:
        said = lock["provider"]
    say(f"  {'lock':<17} {said}")
    for p in now["pending"]:
        if p["kind"] == "write":
            state = "aborted" if p["aborted"] else \
                "its data files have no markers: its completed instant file is lost, or a crash lost " \
                "its markers (`weir table check` says what to do)" if p.get("completed_file_lost") else \
                "alive" if p["alive"] else \
                "dead (the next write rolls it back)"
            doing = f"last sign of life {p['last_sign_of_life_s_ago']} s ago: {state}"
        else:
            run = p["run"]
            doing = f"run by pid {run['pid']} on {run['host']} (attempt {run['attempt']})" if run else \
                "not running"
        say(f"  {'pending':<17} {p['instant']} {p['action']} {p['state']}, {doing}")
    for r in now["running"]:
        say(f"  {'running':<17} {r['what']}, pid {r['pid']} on {r['host']} (attempt {r['attempt']})")


def _dead_writes(instants: Sequence[str]) -> str:
    return f"{counted(len(instants), 'dead write')} ({', '.join(instants)})"


def _instant_named(file_name: str) -> str:
    """`20261129010000000 deltacommit` for the instant file
    `20261129010000000_20261129010000123.deltacommit`."""
    stem, _, action = file_name.partition(".")
    return f"{stem.split('_')[0]} {action.split('.')[0]}" if action else file_name


def _published(result: MaintenanceResult) -> None:
    """An undo's warning: published snapshots read files it deletes (or deleted)."""
    if not result.published:
        return
    formats = " and ".join(f"--format {p.split(':', 1)[0]}" for p in result.published)
    shown = "; ".join(result.published)
    if result.instant is not None:
        say(f"warning: published snapshots read data files this deleted ({shown}): publish the table again "
            f"(weir table publish URI {formats}) so their readers see it as it is now; reading those "
            "snapshots fails from now on", stderr=True)
    elif result.plan is not None:
        say(f"warning: published snapshots read data files this deletes ({shown}): reading them fails once "
            f"it runs; publish the table again afterwards (weir table publish URI {formats})", stderr=True)
