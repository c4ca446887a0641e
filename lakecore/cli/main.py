"""`weir`: create, write, read and inspect lake tables from a shell.

Human-readable tables by default, `--json` for machines. Every failure (lakecore errors, missing or
unreadable files, bad input) becomes one line on stderr that ends with what to do, and exit code 1
(`cli.errors` words it); with `--json` that line is a JSON object; `--debug` (or WEIR_DEBUG=1) also
prints the traceback. Nothing is half-done because the library itself is atomic. `check` and
`repair` exit with the table's state besides (HEALTH_CODES: 2 repairable, 3 needs a human).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Iterable
from functools import wraps
from typing import Annotated, Any, Literal, NoReturn, TypeVar

import pyarrow as pa
import typer
from rich.console import Console
from rich.text import Text

from lakecore.cli.errors import describe as describe_error
from lakecore.cli.io import read_input, read_schema_file, write_output
from lakecore.cli.logs import show_logs
from lakecore.cli.tables import Col, show_table
from lakecore.config import ColumnGroup, LockSpec, schema_to_json
from lakecore.errors import InvalidInput
from lakecore.table import Table
from lakecore.table.maintenance import MaintenanceResult
from lakecore.write import OPERATIONS, check_operation

app = typer.Typer(help="Weir: lake tables with a timeline, merge-on-read and multi-writer control.",
                  no_args_is_help=True)
table_app = typer.Typer(help="Create, write, read and inspect one table.", no_args_is_help=True)
app.add_typer(table_app, name="table")
out = Console()
err = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])
JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
Uri = Annotated[str, typer.Argument(help="Table location: a path, file://, s3:// or memory:// URI.")]
LockProviderOpt = Annotated[str | None, typer.Option(
    "--lock-provider", help="storage|zookeeper|in_process: the lock every writer of the table takes.")]
ZooKeeperOpt = Annotated[str | None, typer.Option(
    "--zookeeper", help="ZooKeeper connect string 'host:2181[,...]' (implies --lock-provider zookeeper).")]
ZooKeeperPathOpt = Annotated[str | None, typer.Option(
    "--zookeeper-path", help="The lock's znode (default /weir/locks/<table key>).")]


_debug = {"on": False}
Debug = Annotated[bool, typer.Option("--debug", help="On failure, print the traceback too.")]


@app.callback()
def _app_options(ctx: typer.Context, debug: Debug = False) -> None:
    _debug["on"] = debug or os.environ.get("WEIR_DEBUG", "") not in ("", "0")
    ctx.call_on_close(show_logs(_debug["on"]))


@table_app.callback()
def _table_options(ctx: typer.Context, debug: Debug = False) -> None:
    if debug and not _debug["on"]:
        _debug["on"] = True
        ctx.call_on_close(show_logs(True))


def fail(exc: BaseException, *, uri: str | None, as_json: bool) -> NoReturn:
    """One line on stderr (a JSON object with --json), the traceback only with --debug; exit 1."""
    error = describe_error(exc, uri)
    if _debug["on"]:
        traceback.print_exception(exc, file=sys.stderr)
    if as_json:
        sys.stderr.write(json.dumps(error.to_json()) + "\n")
    else:
        err.print(Text.assemble(("error:", "red"), " ", error.message), soft_wrap=True)
    raise typer.Exit(1)


def friendly(fn: F) -> F:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):  # typer's own exits and usage errors
            raise
        except Exception as exc:  # the CLI boundary: every failure becomes one line (--debug: traceback)
            fail(exc, uri=kwargs.get("uri"), as_json=bool(kwargs.get("as_json")))
    return wrapper  # type: ignore[return-value]


_TYPES = {"bool": pa.bool_(), "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(),
          "int64": pa.int64(), "float32": pa.float32(), "float64": pa.float64(), "double": pa.float64(),
          "string": pa.string(), "binary": pa.binary(), "date": pa.date32(),
          "timestamp": pa.timestamp("us", tz="UTC")}


def parse_schema(text: str) -> pa.Schema:
    """`id:int64,ts:int64,name:string` -> Arrow schema."""
    fields = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, type_name = part.partition(":")
        if type_name not in _TYPES:
            raise InvalidInput(f"unknown type {type_name!r} for column {name!r}; use one of {sorted(_TYPES)}")
        fields.append(pa.field(name, _TYPES[type_name]))
    if not fields:
        raise InvalidInput("--schema is empty; give e.g. 'id:int64,ts:int64,name:string'")
    return pa.schema(fields)


def parse_group(text: str) -> ColumnGroup:
    """`name:ordering_field:col1+col2` -> ColumnGroup."""
    parts = text.split(":")
    if len(parts) != 3 or not all(parts):
        raise InvalidInput(f"--group {text!r} must look like NAME:ORDERING_FIELD:COL1+COL2")
    return ColumnGroup(parts[0], tuple(c for c in parts[2].split("+") if c), parts[1])


def _value(result: MaintenanceResult) -> Any:
    """A maintenance result as the one value the commands below print: the instant, the archival
    result, else the plan (None: nothing to do)."""
    return result.instant or result.archived or result.plan


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")


TYPES_HELP = "Columns as 'name:type,...' (types: " + ", ".join(sorted(_TYPES)) + ")."


@table_app.command("create")
@friendly
def create(
    uri: Uri,
    schema: Annotated[str, typer.Option(help=TYPES_HELP)] = "",
    schema_from: Annotated[str | None, typer.Option(help="Take the schema from a Parquet file.")] = None,
    record_key: Annotated[list[str] | None, typer.Option(help="Key column (repeat: composite).")] = None,
    partition_field: Annotated[list[str] | None, typer.Option(help="Partition column (repeatable).")] = None,
    table_type: Annotated[str, typer.Option("--type", help="merge_on_read|copy_on_write")] = "merge_on_read",
    ordering_field: Annotated[str | None, typer.Option(help="Event-time ordering column.")] = None,
    group: Annotated[list[str] | None, typer.Option(
        help="Column group NAME:ORDERING:COL1+COL2 (repeatable; makes a partial-update table).")] = None,
    buckets: Annotated[int, typer.Option(help="Buckets (file groups) per partition.")] = 4,
    concurrency_mode: Annotated[str, typer.Option(help="optimistic|non_blocking")] = "optimistic",
    tombstone_retention_hours: Annotated[float | None, typer.Option(
        help="Drop deletes' tombstones from rewritten base files once this many hours old.")] = None,
    lock_provider: LockProviderOpt = None,
    zookeeper: ZooKeeperOpt = None,
    zookeeper_path: ZooKeeperPathOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Create an empty table (recording the lock its writers take: the storage lock unless told)."""
    if schema_from:
        arrow_schema = read_schema_file(schema_from)
    else:
        arrow_schema = parse_schema(schema)
    if not record_key:
        raise InvalidInput("--record-key is required")
    if table_type not in ("merge_on_read", "copy_on_write"):
        raise InvalidInput(f"--type {table_type!r}: use merge_on_read or copy_on_write")
    t = Table.create(uri, schema=arrow_schema, record_key=record_key, partition_fields=partition_field or (),
                     table_type=table_type,  # type: ignore[arg-type]
                     ordering_field=ordering_field, column_groups=[parse_group(g) for g in group or ()],
                     buckets=buckets, concurrency_mode=concurrency_mode,  # type: ignore[arg-type]
                     tombstone_retention_hours=tombstone_retention_hours,
                     lock=lock_spec(lock_provider, zookeeper, zookeeper_path))
    if as_json:
        emit_json(t.config.to_json())
    else:
        out.print(f"created {t.config.table_type} table [bold]{t.config.name}[/bold] at {t.uri} "
                  f"({t.config.merge_mode}, {t.config.buckets} buckets)")


def lock_spec(provider: str | None, zookeeper: str | None, path: str | None) -> LockSpec:
    """The lock the options name; --zookeeper alone means provider zookeeper."""
    chosen = provider or ("zookeeper" if zookeeper else "storage")
    if chosen == "zookeeper":
        if not zookeeper:
            raise InvalidInput("--lock-provider zookeeper needs --zookeeper host:2181[,host:2181]")
        return LockSpec("zookeeper", connect=zookeeper, path=path)
    if zookeeper or path:
        raise InvalidInput(f"--zookeeper and --zookeeper-path go with --lock-provider zookeeper, not "
                           f"{chosen!r}")
    return LockSpec(chosen)  # type: ignore[arg-type]  # LockSpec refuses unknown providers


@table_app.command("set-lock")
@friendly
def set_lock(uri: Uri, lock_provider: LockProviderOpt = None, zookeeper: ZooKeeperOpt = None,
             zookeeper_path: ZooKeeperPathOpt = None,
             timeout: Annotated[float, typer.Option(help="Seconds to wait for each lock.")] = 60.0,
             as_json: JsonFlag = False) -> None:
    """Change the lock every writer of the table takes, holding the old lock and the new one meanwhile.
    Writers still running with the old one stop at their next commit; restart them."""
    t = Table.open(uri)
    before = t.config.lock
    after = t.set_lock_provider(lock_spec(lock_provider, zookeeper, zookeeper_path), timeout=timeout)
    if as_json:
        emit_json({"before": before.to_json(), "after": after.to_json()})
    else:
        out.print(f"lock of {t.uri}: {before.describe()} -> {after.describe()}")


def _write(uri: str, input_file: str, operation: str, as_json: bool) -> None:
    operation = check_operation(operation)  # a wrong name fails before the table is even opened
    t = Table.open(uri)
    data = read_input(input_file, t.schema)
    result = t.write(data, operation)
    counts = result.counts
    if as_json:
        emit_json({"instant": result.instant.requested_time, "completed": result.instant.completion_time,
                   "records": result.records, "rows_written": counts.written,
                   "delete_keys": counts.delete_keys, "file_groups": result.file_groups})
    else:
        out.print(f"{operation}: {counts.describe()} in {result.file_groups} file groups, "
                  f"instant {result.instant.requested_time} completed at {result.instant.completion_time}")


InputFile = Annotated[str, typer.Option("--input", "-i", help="Parquet, CSV or JSON-lines file.")]


@table_app.command("upsert")
@friendly
def upsert(uri: Uri, input_file: InputFile, as_json: JsonFlag = False) -> None:
    """Insert new and update existing records from a file."""
    _write(uri, input_file, "upsert", as_json)


@table_app.command("insert")
@friendly
def insert(uri: Uri, input_file: InputFile,
           bulk: Annotated[bool, typer.Option(help="Bulk insert (fast initial load).")] = False,
           as_json: JsonFlag = False) -> None:
    """Insert records from a file."""
    _write(uri, input_file, "bulk_insert" if bulk else "insert", as_json)


@table_app.command("delete")
@friendly
def delete(uri: Uri, input_file: InputFile, as_json: JsonFlag = False) -> None:
    """Delete the records whose keys are in a file."""
    _write(uri, input_file, "delete", as_json)


@table_app.command("overwrite")
@friendly
def overwrite(uri: Uri, input_file: InputFile,
              whole_table: Annotated[bool, typer.Option(
                  "--table", help="Replace the whole table (insert_overwrite_table), not only the "
                  "partitions the input touches (insert_overwrite).")] = False,
              as_json: JsonFlag = False) -> None:
    """Replace the partitions the input touches (or, with --table, the whole table) with its rows."""
    _write(uri, input_file, "insert_overwrite_table" if whole_table else "insert_overwrite", as_json)


@table_app.command("write")
@friendly
def write(uri: Uri, input_file: InputFile,
          operation: Annotated[str, typer.Option(help=f"One of {'|'.join(OPERATIONS)}.")] = "upsert",
          as_json: JsonFlag = False) -> None:
    """Write a file with any write operation (what the LakeWriter's `operation` names)."""
    _write(uri, input_file, operation, as_json)


@table_app.command("read")
@friendly
def read(uri: Uri,
         as_of: Annotated[str | None, typer.Option(help="Instant time or ISO timestamp.")] = None,
         columns: Annotated[str | None, typer.Option(help="Comma-separated columns.")] = None,
         fmt: Annotated[str | None, typer.Option("--format", help="parquet, csv or json.")] = None,
         output: Annotated[str | None, typer.Option("--output", "-o", help="Write to this file.")] = None,
         limit: Annotated[int, typer.Option(help="Rows shown in the human view.")] = 20,
         with_meta: Annotated[bool, typer.Option(help="Include _weir_ meta columns.")] = False,
         as_json: JsonFlag = False) -> None:
    """Read the table (snapshot, or as of an instant)."""
    t = Table.open(uri)
    cols = [c.strip() for c in columns.split(",")] if columns else None
    data = t.read(as_of=as_of, columns=cols, with_meta=with_meta)
    if as_json and fmt is None:
        fmt = "json"
    if fmt is not None:
        if fmt not in ("parquet", "csv", "json"):
            raise InvalidInput(f"--format {fmt!r}: use parquet, csv or json")
        write_output(data, fmt, output)  # type: ignore[arg-type]
        return
    if output:
        from lakecore.cli.io import guess_format
        write_output(data, guess_format(output), output)
        out.print(f"wrote {data.num_rows} rows to {output}")
        return
    keys = {*t.config.record_key, *(c for c in data.column_names if c.startswith("_weir_"))}
    shown = data.slice(0, limit).to_pylist()
    show_table(out, [Col(c, "id" if c in keys else "text") for c in data.column_names],
               [["" if v is None else str(v) for v in row.values()] for row in shown],
               title=f"{t.config.name}: {data.num_rows} rows")
    if data.num_rows > limit:
        out.print(f"... {data.num_rows - limit} more rows (use --output or --format)")


@table_app.command("timeline")
@friendly
def timeline(uri: Uri,
             archived: Annotated[bool, typer.Option("--archived", help="List archived ones too.")] = False,
             html: Annotated[str | None, typer.Option(
                 "--html", help="Write a picture of the timeline (one lane per writer, services, aborts) "
                                "to this HTML file instead, and print its path.")] = None,
             as_json: JsonFlag = False) -> None:
    """List the table's instants (writes and table services; archived ones with --archived)."""
    t = Table.open(uri)
    if html is not None:
        from lakecore.cli.timeline_html import write_timeline_html

        written = write_timeline_html(t, html)
        if as_json:
            emit_json({"html": str(written)})
        else:
            sys.stdout.write(f"{written}\n")
        return
    tl = t.timeline()
    rows = []
    listed = list(tl.instants)
    if archived and tl.archived.count:
        listed = t.archived_instants() + listed
    for i in listed:
        meta = t.commit_metadata(i) if i.is_completed else None
        counts = meta.counts if meta else None
        rows.append({"instant": i.requested_time, "action": i.action, "state": i.state.name.lower(),
                     "completed": i.completion_time, "operation": meta.operation if meta else None,
                     "records": meta.records if meta else None,
                     "rows_written": counts.written if counts else None,
                     "delete_keys": counts.delete_keys if counts else None,
                     "file_groups": len(meta.file_groups) if meta else None})
    if as_json:
        emit_json(rows)
        return
    title = f"{t.config.name}: {len(rows)} instants"
    if tl.archived.count and not archived:
        title += f" ({tl.archived.count} older ones archived: --archived lists them)"
    # narrow: FILE GROUPS goes first, then ACTION (OPERATION, or the action while pending, says more)
    shown = {"instant": Col("INSTANT", "id"), "action": Col("ACTION", drop=1), "state": Col("STATE"),
             "completed": Col("COMPLETED", "id"), "operation": Col("OPERATION"),
             "rows_written": Col("ROWS WRITTEN", "number"), "delete_keys": Col("DELETE KEYS", "number"),
             "file_groups": Col("FILE GROUPS", "number", drop=2)}
    show_table(out, list(shown.values()), [_timeline_cells(r, shown) for r in rows], title=title)
    if any(r["delete_keys"] for r in rows):
        out.print("DELETE KEYS: the record keys a write deletes; a key whose row the table does not hold "
                  "deletes nothing", style="dim", highlight=False)


def _timeline_cells(row: dict[str, Any], keys: Iterable[str]) -> list[str]:
    """A timeline row as shown: a pending instant's operation is its action; an instant that wrote no
    files (a rollback, a clean) shows no counts."""
    shown = {**row, "operation": row["operation"] or row["action"]}
    if not row["file_groups"]:
        shown.update(rows_written=None, delete_keys=None, file_groups=None)
    return ["" if shown[k] is None else f"{shown[k]:,}" if isinstance(shown[k], int) else str(shown[k])
            for k in keys]


@table_app.command("describe")
@friendly
def describe(uri: Uri, as_json: JsonFlag = False) -> None:
    """Show the table's configuration and size, and what goes on at it now: who holds its lock, the
    pending instants with their writers' last heartbeats, the service runs."""
    t = Table.open(uri)
    info = {**t.describe(), "activity": t.activity()}
    if as_json:
        emit_json(info)
        return
    cfg = info["config"]
    out.print(f"[bold]{cfg['name']}[/bold] at {info['uri']}")
    for label, value in (("type", cfg["table_type"]), ("merge mode", cfg["merge_mode"]),
                         ("record key", ", ".join(cfg["record_key"])),
                         ("partition fields", ", ".join(cfg["partition_fields"]) or "(unpartitioned)"),
                         ("ordering field", cfg["ordering_field"] or "-"), ("buckets", cfg["buckets"]),
                         ("instants", f"{info['instants']['completed']} completed, "
                                      f"{len(info['instants']['pending'])} pending"),
                         ("data", f"{info['files']} files in {info['file_groups']} file groups, "
                                  f"{info['partitions']} partitions, {info['bytes']:,} bytes")):
        out.print(f"  {label:<17} {value}")
    for g in cfg["column_groups"]:
        out.print(f"  group {g['name']:<11} {', '.join(g['columns'])} (ordered by {g['ordering_field']})")
    _print_activity(info["activity"])
    out.print("  schema")
    for f in schema_to_json(t.schema):
        out.print(f"    {f['name']:<20} {f['type']}{'' if f['nullable'] else ' not null'}")


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
    out.print(f"  {'lock':<17} {said}")
    for p in now["pending"]:
        if p["kind"] == "write":
            state = "aborted" if p["aborted"] else "alive" if p["alive"] else \
                "dead (the next write rolls it back)"
            doing = f"last sign of life {p['last_sign_of_life_s_ago']} s ago: {state}"
        else:
            run = p["run"]
            doing = f"run by pid {run['pid']} on {run['host']} (attempt {run['attempt']})" if run else \
                "not running"
        out.print(f"  {'pending':<17} {p['instant']} {p['action']} {p['state']}, {doing}")
    for r in now["running"]:
        out.print(f"  {'running':<17} {r['what']}, pid {r['pid']} on {r['host']} (attempt {r['attempt']})")


@table_app.command("compact")
@friendly
def compact(uri: Uri,
            strategy: Annotated[str, typer.Option(help="all | log_count | log_size | bounded_io")] = "all",
            min_logs: Annotated[int, typer.Option(help="log_count: slices with at least this many logs")] = 1,
            dry_run: Annotated[bool, typer.Option(help="Print the plan, change nothing.")] = False,
            resume: Annotated[bool, typer.Option(help="Finish a compaction a dead process left.")] = False,
            as_json: JsonFlag = False) -> None:
    """Compact merge-on-read file slices (logs merged into new base files)."""
    from lakecore.services import CompactionPlan, CompactionStrategy
    t = Table.open(uri)
    done = t.maintenance.compact(CompactionStrategy(strategy, min_logs=min_logs),  # type: ignore[arg-type]
                                 dry_run=dry_run, resume=resume)
    result = _value(done)
    if result is None:
        if as_json:
            emit_json({"compacted": None})
        else:
            out.print("nothing to compact")
        return
    if isinstance(result, CompactionPlan):
        ops = [{"partition": o.partition, "file_id": o.file_id, "base": o.base_file, "logs": len(o.log_files)}
               for o in result.operations]
        if as_json:
            emit_json({"dry_run": True, "operations": ops})
        else:
            out.print(f"would compact {len(ops)} file slice(s):")
            for o in ops:
                where = o["partition"] or "(unpartitioned)"
                out.print(f"  {o['file_id']} in {where}: {o['logs']} log file(s)")
        return
    meta = t.commit_metadata(result)
    if as_json:
        emit_json({"compaction": result.requested_time, "completed": result.completion_time,
                   "file_groups": len(meta.file_groups)})
    else:
        out.print(f"compacted {len(meta.file_groups)} file group(s): instant {result.requested_time}")


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
            dry_run: Annotated[bool, typer.Option(help="Print the plan, change nothing.")] = False,
            resume: Annotated[bool, typer.Option(help="Finish a clustering a dead process left.")] = False,
            as_json: JsonFlag = False) -> None:
    """Cluster file groups: rewrite each chosen group's latest slice into one (sorted) base file."""
    from lakecore.services import ClusteringPlan, ClusteringStrategy
    cols = tuple(c.strip() for c in sort_columns.split(",") if c.strip()) if sort_columns else ()
    chosen = ClusteringStrategy(strategy, cols, small_file_bytes, max_groups)  # type: ignore[arg-type]
    t = Table.open(uri)
    done = t.maintenance.cluster(chosen, dry_run=dry_run, resume=resume)
    result = _value(done)
    if result is None:
        emit_json({"clustered": None}) if as_json else out.print("nothing to cluster")
        return
    if isinstance(result, ClusteringPlan):
        ops = [{"partition": o.partition, "file_id": o.file_id, "base_instant": o.base_instant,
                "files": len(o.paths()), "bytes": o.bytes} for o in result.operations]
        if as_json:
            emit_json({"dry_run": True, "strategy": chosen.to_json(), "operations": ops})
        else:
            by = f", sorted by {', '.join(cols)}" if cols else ""
            out.print(f"would cluster {len(ops)} file group(s){by}:")
            for o in ops:
                where = o["partition"] or "(unpartitioned)"
                out.print(f"  {o['file_id']} in {where}: {o['files']} file(s), {o['bytes']:,} bytes")
        return
    meta = t.commit_metadata(result)
    if as_json:
        emit_json({"clustering": result.requested_time, "completed": result.completion_time,
                   "file_groups": len(meta.file_groups), "sort_columns": list(cols)})
    else:
        out.print(f"clustered {len(meta.file_groups)} file group(s): replacecommit {result.requested_time}")


@table_app.command("clean")
@friendly
def clean(uri: Uri,
          policy: Annotated[str, typer.Option(
              help="keep_latest_commits|keep_latest_file_versions|keep_by_hours")] = "keep_latest_commits",
          retain: Annotated[int | None, typer.Option(help="commits, versions or hours to keep")] = None,
          dry_run: Annotated[bool, typer.Option("--dry-run/--run", help="Only print the plan.")] = True,
          as_json: JsonFlag = False) -> None:
    """Delete files that no retained read needs (dry run unless --run)."""
    from lakecore.services import CleanPlan, CleanPolicy
    t = Table.open(uri)
    done = t.maintenance.clean(CleanPolicy(policy, retain), dry_run=dry_run)  # type: ignore[arg-type]
    result = _value(done)
    if result is None:
        emit_json({"deleted": []}) if as_json else out.print("nothing to clean")
        return
    if isinstance(result, CleanPlan):
        if as_json:
            emit_json({"dry_run": True, "files": result.files, "rollbacks": list(result.rollbacks)})
        else:
            out.print(f"would delete {len(result.files)} file(s) and roll back {len(result.rollbacks)} "
                      "dead write(s); run with --run to do it")
            for f in result.files[:50]:
                out.print(f"  {f}")
        return
    deleted = t.commit_metadata(result).extra.get("deleted", [])
    if as_json:
        emit_json({"clean": result.requested_time, "deleted": deleted})
    else:
        out.print(f"clean {result.requested_time}: deleted {len(deleted)} file(s)")


@table_app.command("savepoint")
@friendly
def savepoint(uri: Uri, instant: Annotated[str, typer.Argument(help="Completed write instant to pin.")],
              comment: Annotated[str, typer.Option(help="Why this savepoint exists.")] = "",
              dry_run: Annotated[bool, typer.Option(help="Print what it would pin, change nothing.")] = False,
              as_json: JsonFlag = False) -> None:
    """Pin a completed write instant (clean keeps its files; restore can return to it)."""
    from lakecore.services import Savepoint
    result = Table.open(uri).maintenance.savepoint(instant, comment=comment, dry_run=dry_run)
    done = _value(result)
    if isinstance(done, Savepoint):
        emit_json({"dry_run": True, "savepointed": instant, "files": list(done.files)}) if as_json else \
            out.print(f"would pin instant {instant} and the {len(done.files)} data file(s) it reads")
    elif as_json:
        emit_json({"savepoint": done.requested_time, "savepointed": instant})
    else:
        out.print(f"savepoint {done.requested_time} pins instant {instant}")


@table_app.command("restore")
@friendly
def restore(uri: Uri, savepoint: Annotated[str, typer.Argument(help="Savepoint to return to.")],
            dry_run: Annotated[bool, typer.Option("--dry-run/--run", help="Only print the plan.")] = True,
            as_json: JsonFlag = False) -> None:
    """Make the table read as at a savepoint (dry run unless --run)."""
    from lakecore.services import UndoPlan
    done = Table.open(uri).maintenance.restore(savepoint, dry_run=dry_run)
    result = _value(done)
    if result is None:
        emit_json({"restored": None}) if as_json else out.print("nothing to undo")
    elif isinstance(result, UndoPlan):
        if as_json:
            emit_json({"dry_run": True, "undo": list(result.undone), "files": list(result.files)})
        else:
            out.print(f"would undo {len(result.undone)} instant file(s) and delete {len(result.files)} data "
                      "file(s); run with --run to do it")
    else:
        emit_json({"restore": result.requested_time}) if as_json else \
            out.print(f"restored savepoint {savepoint} (restore instant {result.requested_time})")


@table_app.command("rollback")
@friendly
def rollback(uri: Uri, instant: Annotated[str, typer.Argument(help="Pending or completed write.")],
             yes: Annotated[bool, typer.Option("--yes", help="Do it (without: show what it would do, or ask "
                                               "on a terminal).")] = False,
             force: Annotated[bool, typer.Option(help="Roll back a pending write even if its writer looks "
                                                 "alive (only when you know its process is gone).")] = False,
             dry_run: Annotated[bool, typer.Option(help="Only print what it would undo (the default "
                                                   "without --yes).")] = False,
             as_json: JsonFlag = False) -> None:
    """Roll back a failed (pending) write, or a completed one not yet compacted; its files are deleted.
    Shows what it would do unless --yes (on a terminal it asks); a completed instant is named as such,
    and the rollback re-checks under the table lock that the instant is still in the state shown."""
    import sys

    from lakecore.services import UndoPlan
    table = Table.open(uri)
    seen = table.timeline().find(instant)
    state: Literal["pending", "completed"] = "pending" if seen is not None and not seen.is_completed \
        else "completed"
    looked = table.maintenance.rollback(instant, dry_run=True, force=force)
    plan = _value(looked)
    if not isinstance(plan, UndoPlan):  # undone already (a rollback that died half-way was finished)
        _report_rollback(instant, plan, as_json)
        return
    what = f"{state} instant {instant}" + (f" ({seen.action})" if seen is not None else "")
    if dry_run or not yes:
        asked = not dry_run and not as_json and sys.stdin.isatty() and typer.confirm(
            f"roll back {what} and delete {len(plan.files)} data file(s)?", default=False)
        if not asked:
            if as_json:
                emit_json({"dry_run": True, "state": state, "undo": list(plan.undone),
                           "files": list(plan.files)})
            else:
                out.print(f"would roll back {what} and delete {len(plan.files)} data file(s); rerun with "
                          "--yes to do it")
            return
    done = table.maintenance.rollback(instant, dry_run=False, force=force, expect=state)
    _report_rollback(instant, _value(done), as_json)


def _report_rollback(instant: str, done: Any, as_json: bool) -> None:
    if as_json:
        emit_json({"rollback": done.requested_time, "completed": done.completion_time})
    else:
        out.print(f"rolled back {instant} (rollback instant {done.requested_time})")


@table_app.command("archive")
@friendly
def archive(uri: Uri,
            min_instants: Annotated[int, typer.Option(help="Completed instants that stay active.")] = 20,
            max_instants: Annotated[int, typer.Option(help="Archive when more are active.")] = 30,
            fanout: Annotated[int, typer.Option(help="History files merged per level.")] = 10,
            dry_run: Annotated[bool, typer.Option(help="Print the plan, change nothing.")] = False,
            as_json: JsonFlag = False) -> None:
    """Move the oldest completed instants into the archived timeline (reads keep working across it)."""
    from lakecore.services import ArchivalPlan, ArchivalPolicy
    policy = ArchivalPolicy(min_instants, max_instants, fanout)
    done = Table.open(uri).maintenance.archive(policy, dry_run=dry_run)
    result = _value(done)
    if result is None or (isinstance(result, ArchivalPlan) and not result.instants):
        if as_json:
            emit_json({"archived": 0, "stopped_by": getattr(result, "stopped_by", None)})
        else:
            why = getattr(result, "stopped_by", None)
            out.print(f"nothing to archive{f' (stopped by {why})' if why else ''}")
    elif isinstance(result, ArchivalPlan):
        if as_json:
            emit_json({"dry_run": True, **result.to_json()})
        else:
            out.print(f"would archive {len(result.instants)} instant(s), {result.instants[0].requested_time} "
                      f"to {result.instants[-1].requested_time}"
                      + (f"; stopped by {result.stopped_by}" if result.stopped_by else ""))
    elif as_json:
        emit_json(result.to_json())
    else:
        levels = ", ".join(f"L{k}: {v}" for k, v in result.levels.items())
        out.print(f"archived {result.archived} instant(s) up to {result.boundary} (history version "
                  f"{result.version}; files per level {levels}; {result.live_files} live files)")


HEALTH_CODES = ("Exit codes (check and repair alike, dry run or --run): 0 nothing wrong (after --run: "
                "nothing left); 2 problems that `weir table repair URI --run` fixes; 3 a problem a human "
                "must fix (restore a file from a backup: each line says what to do); 1 the command itself "
                "failed.")


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
    if as_json:
        emit_json({"ok": not problems, "exit_code": code, "problems": [p.to_json() for p in problems]})
    elif not problems:
        out.print(f"{uri}: no problems found")
    for p in problems if not as_json else ():
        err.print(f"problem: {p.describe()}", highlight=False, soft_wrap=True, markup=False)
    if code:
        raise typer.Exit(code)


@table_app.command("repair", help="Repair a damaged table (dry run unless --run): rebuild a damaged "
                   "completed instant from its data files (or, when a file it wrote is missing, roll the "
                   "write back, with a warning), recreate a lost table.json from the timeline, fall back "
                   "to an older history manifest, quarantine a damaged plan. Files it replaces or moves "
                   "aside are kept in .weir/quarantine/. " + HEALTH_CODES)
@friendly
def repair(uri: Uri,
           dry_run: Annotated[bool, typer.Option("--dry-run/--run", help="Only print the plan.")] = True,
           as_json: JsonFlag = False) -> None:
    from lakecore.services.repair import exit_code, repair_lock, run_repair
    from lakecore.storage import open_storage
    storage = open_storage(uri)
    report = run_repair(storage, repair_lock(storage), dry_run=dry_run)
    if as_json:
        emit_json(report.to_json())
    else:
        if not report.actions:
            out.print("nothing to repair")
        for a in report.actions:
            out.print(a.describe(), highlight=False, soft_wrap=True, markup=False)
            if a.warning:
                err.print(f"warning: {a.warning}", highlight=False, soft_wrap=True, markup=False)
        if dry_run and report.actions:
            out.print("run with --run to do it")
        for p in report.remaining if not dry_run else [p for p in report.remaining if not p.repairable]:
            err.print(f"problem: {p.describe()}", highlight=False, soft_wrap=True, markup=False)
    code = exit_code(report.remaining)
    if code:
        raise typer.Exit(code)


def main() -> None:  # pragma: no cover - console entry point
    app()
