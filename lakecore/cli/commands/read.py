"""`weir table read`: the table's rows (snapshot, or as of an instant) as a table, a file or a stream; read
with a scan, so the rows go out slice by slice and never all sit in memory."""

from __future__ import annotations

from typing import Annotated

import typer

from lakecore.cli.app import JsonFlag, Uri, friendly, table_app
from lakecore.cli.io import check_output, guess_format, write_output
from lakecore.cli.output import output_for
from lakecore.errors import InvalidInput
from lakecore.read.conditions import CLI, conditions_filter
from lakecore.table import Table


@table_app.command("read")
@friendly
def read(uri: Uri,
         as_of: Annotated[str | None, typer.Option(help="Instant time or ISO timestamp.")] = None,
         columns: Annotated[str | None, typer.Option(help="Comma-separated columns.")] = None,
         fmt: Annotated[str | None, typer.Option("--format", help="parquet, csv or json.")] = None,
         output: Annotated[str | None, typer.Option("--output", "-o", help="Write to this file.")] = None,
         limit: Annotated[int, typer.Option(help="Rows shown in the human view.")] = 20,
         where: Annotated[list[str] | None, typer.Option(
             help="Only rows where this holds: 'COL OP VALUE' (= != < <= > >=), \"COL in ('a', 'b')\", "
                  "'COL is null', 'COL is not null', joined with and / or (and first); repeat it for "
                  "several (all must hold). "
                  "Skips files and row groups whose statistics rule it out.")] = None,
         with_meta: Annotated[bool, typer.Option(help="Include _weir_ meta columns.")] = False,
         as_json: JsonFlag = False) -> None:
    """Read the table (snapshot, or as of an instant)."""
    shown = output_for(as_json)
    t = Table.open(uri)
    cols = [c.strip() for c in columns.split(",")] if columns else None
    fmt = fmt or shown.data_format
    if fmt is not None and fmt not in ("parquet", "csv", "json"):
        raise InvalidInput(f"--format {fmt!r}: use parquet, csv or json")
    check_output(output)   # a folder that is not there is told before the table is read
    # streamed: a table larger than memory is written out slice by slice
    condition = conditions_filter(where or [], t.schema, meta=with_meta, wording=CLI)
    rows = t.scan(as_of=as_of, columns=cols, filter=condition, with_meta=with_meta).to_arrow_batch_reader()
    if fmt is not None:
        write_output(rows, fmt, output)  # type: ignore[arg-type]
        return
    if output:
        shown.rows_saved(write_output(rows, guess_format(output), output), output)
        return
    shown.rows(t, rows, limit)
