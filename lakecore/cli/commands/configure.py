"""`weir table create`, `weir table set-lock` and `weir table set-compression`: make a table, and change the
lock its writers take or the Parquet codec of the files they write next."""

from __future__ import annotations

import re
from typing import Annotated

import pyarrow as pa
import typer

from lakecore.cli.app import JsonFlag, Uri, friendly, table_app
from lakecore.cli.io import read_schema_file
from lakecore.cli.output import output_for
from lakecore.config import CODECS, DEFAULT_CODEC, TYPES_LISTED, ColumnGroup, LockSpec, type_named
from lakecore.errors import InvalidInput, InvalidTableConfig
from lakecore.table import Table

LockProviderOpt = Annotated[str | None, typer.Option(
    "--lock-provider", help="storage|zookeeper|in_process: the lock every writer of the table takes.")]
ZooKeeperOpt = Annotated[str | None, typer.Option(
    "--zookeeper", help="ZooKeeper connect string 'host:2181[,...]' (implies --lock-provider zookeeper).")]
ZooKeeperPathOpt = Annotated[str | None, typer.Option(
    "--zookeeper-path", help="The lock's znode (default /weir/locks/<table key>).")]

CODECS_HELP = (f"Parquet codec of the data files: {'|'.join(CODECS)} (zstd: smallest; lz4: fastest to "
               "write and read, ~16% more bytes; see docs/operations.md).")
_LISTED = ", ".join(TYPES_LISTED)
TYPES_HELP = f"Columns as 'name:type,...' (types: {_LISTED}; date = date32, timestamp = timestamp_us, UTC)."
_ENTRIES = re.compile(r",(?![^(<]*[)>])")   # commas between entries, not inside decimal(10,2) or map<a,b>


def parse_schema(text: str) -> pa.Schema:
    """`id:int64,ts:int64,name:string` -> Arrow schema."""
    fields = []
    for part in filter(None, (p.strip() for p in _ENTRIES.split(text))):
        name, colon, type_name = (x.strip() for x in part.partition(":"))
        if not colon or not name:
            raise InvalidInput(f"--schema entry {part!r} is not NAME:TYPE; give e.g. "
                               "'id:int64,ts:int64,name:string'")
        fields.append(pa.field(name, _type(name, type_name)))
    if not fields:
        raise InvalidInput("the table needs columns: give --schema 'id:int64,ts:int64,name:string' (types: "
                           f"{_LISTED}) or --schema-from FILE.parquet")
    return pa.schema(fields)


def _type(column: str, name: str) -> pa.DataType:
    """A type by the LakeTable CRD's name (or a short one); InvalidInput naming the likely one."""
    try:
        return type_named(name, column)
    except InvalidTableConfig as exc:
        raise InvalidInput(f"{exc}; use one of {_LISTED} (other types: --schema-from a Parquet file that "
                           "has them)") from None


def parse_group(text: str) -> ColumnGroup:
    """`name:ordering_field:col1+col2` -> ColumnGroup."""
    parts = text.split(":")
    if len(parts) != 3 or not all(parts):
        raise InvalidInput(f"--group {text!r} must look like NAME:ORDERING_FIELD:COL1+COL2")
    return ColumnGroup(parts[0], tuple(c for c in parts[2].split("+") if c), parts[1])


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


@table_app.command("create")
@friendly
def create(
    uri: Uri,
    schema: Annotated[str, typer.Option(help=TYPES_HELP)] = "",
    schema_from: Annotated[str | None, typer.Option(help="Take the schema from a Parquet file.")] = None,
    record_key: Annotated[list[str] | None, typer.Option(help="Key column (repeat: composite); a key is "
                                                         "unique within its partition.")] = None,
    partition_field: Annotated[list[str] | None, typer.Option(help="Partition column (repeatable). A row "
                                                              "whose partition value changes is a new "
                                                              "row in its new partition.")] = None,
    table_type: Annotated[str, typer.Option("--type", help="merge_on_read|copy_on_write")] = "merge_on_read",
    ordering_field: Annotated[str | None, typer.Option(help="Event-time ordering column.")] = None,
    group: Annotated[list[str] | None, typer.Option(
        help="Column group NAME:ORDERING:COL1+COL2 (repeatable; makes a partial-update table).")] = None,
    buckets: Annotated[int, typer.Option(help="Buckets (file groups) per partition.")] = 4,
    concurrency_mode: Annotated[str, typer.Option(help="optimistic|non_blocking")] = "optimistic",
    compression: Annotated[str, typer.Option(help=CODECS_HELP)] = DEFAULT_CODEC,
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
                     compression=compression,
                     tombstone_retention_hours=tombstone_retention_hours,
                     lock=lock_spec(lock_provider, zookeeper, zookeeper_path))
    output_for(as_json).created(t)


@table_app.command("set-lock")
@friendly
def set_lock(uri: Uri, lock_provider: LockProviderOpt = None, zookeeper: ZooKeeperOpt = None,
             zookeeper_path: ZooKeeperPathOpt = None,
             timeout: Annotated[float, typer.Option(help="Seconds to wait for each lock.")] = 60.0,
             old_lock_gone: Annotated[bool, typer.Option(
                 "--old-lock-gone",
                 help="The current lock cannot be reached any more (a ZooKeeper gone for good): change it "
                      "holding the new lock only. Stop every writer of the table first; refused while a "
                      "write is live.")] = False,
             as_json: JsonFlag = False) -> None:
    """Change the lock every writer of the table takes, holding the old lock and the new one meanwhile.
    Writers still running with the old one stop at their next commit; restart them."""
    t = Table.open(uri)
    before = t.config.lock
    after = t.set_lock_provider(lock_spec(lock_provider, zookeeper, zookeeper_path), timeout=timeout,
                                unreachable_ok=old_lock_gone)
    output_for(as_json).lock_changed(t, before, after)


@table_app.command("set-compression")
@friendly
def set_compression(uri: Uri, codec: Annotated[str, typer.Argument(help="|".join(CODECS))],
                    timeout: Annotated[float, typer.Option(help="Seconds to wait for the lock.")] = 60.0,
                    as_json: JsonFlag = False) -> None:
    """Change the Parquet codec of the files written from now on (under the table lock; writers may run).
    Files already written keep their codec and read as before; running writers take the new one up
    after their next commit."""
    t = Table.open(uri)
    before = t.config.compression
    after = t.set_compression(codec, timeout=timeout)
    output_for(as_json).compression_changed(t, before, after)
