"""`weir table timeline|describe|check`: look at a table without changing it."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from lakecore.cli.app import JsonFlag, Uri, friendly, table_app
from lakecore.cli.output import output_for
from lakecore.table import Table

HEALTH_CODES = ("Exit codes (check and repair alike, dry run or --run): 0 nothing wrong (after --run: "
                "nothing left); 2 problems that `weir table repair URI --run` fixes; 3 a problem a human "
                "must fix (restore a file from a backup: each line says what to do); 1 the command itself "
                "failed.")


@table_app.command("timeline")
@friendly
def timeline(uri: Uri,
             archived: Annotated[bool, typer.Option("--archived", help="List archived ones too.")] = False,
             html: Annotated[str | None, typer.Option(
                 "--html", help="Write a picture of the timeline (one lane per writer, services, aborts) "
                                "to this HTML file instead, and print its path.")] = None,
             as_json: JsonFlag = False) -> None:
    """List the table's instants (writes and table services; archived ones with --archived)."""
    shown = output_for(as_json)
    t = Table.open(uri)
    if html is not None:
        from lakecore.cli.timeline_html import write_timeline_html

        shown.timeline_picture(str(write_timeline_html(t, html)))
        return
    tl = t.timeline()
    listed = list(tl.instants)
    if archived and tl.archived.count:
        listed = t.archived_instants() + listed
    rows: list[dict[str, Any]] = []
    for i in listed:
        meta = t.commit_metadata(i) if i.is_completed else None
        counts = meta.counts if meta else None
        # a savepoint instant pins a write or lets an earlier savepoint go: which, and whose
        pinned = {k: meta.extra[k] for k in ("savepointed", "deleted_savepoint")
                  if meta and i.action == "savepoint" and k in meta.extra}
        operation = "delete_savepoint" if "deleted_savepoint" in pinned else meta.operation if meta else None
        rows.append({"instant": i.requested_time, "action": i.action, "state": i.state.name.lower(),
                     "completed": i.completion_time, "operation": operation,
                     "records": meta.records if meta else None,
                     "rows_written": counts.written if counts else None,
                     "delete_keys": counts.delete_keys if counts else None,
                     "file_groups": len(meta.file_groups) if meta else None, **pinned,
                     # what the writer recorded with its commit (a Kafka writer's offsets and the bad
                     # messages it skipped, a batch id, ...): --json shows it
                     "extra": {k: v for k, v in meta.extra.items() if isinstance(v, str | int | float | bool)}
                     if meta else None})
    shown.timeline(t, rows, tl.archived.count, archived)


@table_app.command("describe")
@friendly
def describe(uri: Uri, as_json: JsonFlag = False) -> None:
    """Show the table's configuration and size, and what goes on at it now: who holds its lock, the
    pending instants with their writers' last heartbeats, the service runs."""
    t = Table.open(uri)
    output_for(as_json).description(t, {**t.describe(), "activity": t.activity()})


@table_app.command("check", help="Verify the table (read-only): table.json, the timeline and its history, "
                   "and every data file the latest snapshot reads (that it exists, its size, its Parquet "
                   "footer and row count; --deep also decodes every page). Prints one line per problem "
                   "with the file, the instant that wrote it and the remedy. " + HEALTH_CODES)
@friendly
def check(uri: Uri,
          deep: Annotated[bool, typer.Option(
              "--deep", help="Also read every data file whole (costs a full read of the table).")] = False,
          as_json: JsonFlag = False) -> None:
    from lakecore.services.repair import check_table, exit_code
    from lakecore.storage import open_storage
    problems = check_table(open_storage(uri), deep=deep)
    code = exit_code(problems)
    output_for(as_json).check(uri, problems, code)
    if code:
        raise typer.Exit(code)
