"""`weir table publish`: Iceberg or Delta metadata beside a table, so other engines read it.

The work is Table.publish; its PublishResult goes to the command's output (cli/output.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from lakecore.cli.app import JsonFlag, Uri, friendly, table_app
from lakecore.cli.output import output_for
from lakecore.table import Table


@table_app.command("publish")
@friendly
def publish(uri: Uri,
            format: Annotated[str, typer.Option("--format", help="iceberg | delta")],
            view: Annotated[str | None, typer.Option(
                help="snapshot (merged, the default) | read_optimized (base files only; the only view of "
                     "column-group tables)")] = None,
            keep: Annotated[int, typer.Option(help="Published snapshots kept for time travel (clean keeps "
                                                   "their files).")] = 10,
            as_json: JsonFlag = False) -> None:
    """Publish the table's latest instant as Iceberg or Delta metadata beside it, over its files as they
    are (see docs/interop.md): incremental when it can be, crash-safe."""
    output_for(as_json).published(Table.open(uri).publish(format, view=view, keep=keep))
