"""`weir table publish`: Iceberg or Delta metadata beside a table, so other engines read it, and the
Iceberg table registered in a catalog (`--catalog-table`).

The work is Table.publish; its PublishResult goes to the command's output (cli/output.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from lakecore.cli.app import JsonFlag, Uri, friendly, table_app
from lakecore.cli.output import output_for
from lakecore.errors import InvalidInput
from lakecore.publish import CatalogRef
from lakecore.table import Table


def catalog_ref(table: str | None, name: str, properties: list[str]) -> CatalogRef | None:
    """The catalog the options name (None: no --catalog-table); KEY=VALUE properties parsed."""
    if table is None:
        if properties:
            raise InvalidInput("--catalog-property needs --catalog-table NAMESPACE.TABLE (the name to "
                               "register)")
        return None
    if "." not in table.strip(".") or not all(table.split(".")):
        raise InvalidInput(f"--catalog-table {table!r} must look like NAMESPACE.TABLE")
    parsed: dict[str, str] = {}
    for item in properties:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidInput(f"--catalog-property {item!r} must look like KEY=VALUE (e.g. type=rest, "
                               "uri=http://catalog:8181)")
        parsed[key.strip()] = value
    return CatalogRef(table, parsed, name)


@table_app.command("publish")
@friendly
def publish(uri: Uri,
            format: Annotated[str, typer.Option("--format", help="iceberg | delta")],
            view: Annotated[str | None, typer.Option(
                help="snapshot (merged, the default) | read_optimized (base files only; the only view of "
                     "column-group tables)")] = None,
            keep: Annotated[int, typer.Option(help="Published snapshots kept for time travel (clean keeps "
                                                   "their files).")] = 10,
            catalog_table: Annotated[str | None, typer.Option(
                help="Register the Iceberg table in a catalog under NAMESPACE.TABLE (moved to the new "
                     "metadata on every publish).")] = None,
            catalog: Annotated[str, typer.Option(
                help="The catalog's name in pyiceberg's configuration (~/.pyiceberg.yaml, "
                     "PYICEBERG_CATALOG__<NAME>__*).")] = "default",
            catalog_property: Annotated[list[str] | None, typer.Option(
                help="A pyiceberg catalog property KEY=VALUE (type=sql|rest|glue|hive, uri=..., "
                     "warehouse=...); repeat it.")] = None,
            iceberg_format_version: Annotated[int | None, typer.Option(
                help="2 (position-delete files) | 3 (one deletion vector per data file; pyiceberg, DuckDB "
                     "and Spark read it, daft does not). Default: the version the table is published in "
                     "already, 2 for a new one. 3 -> 2 is refused.")] = None,
            as_json: JsonFlag = False) -> None:
    """Publish the table's latest instant as Iceberg or Delta metadata beside it, over its files as they
    are (see docs/interop.md): incremental when it can be, crash-safe."""
    ref = catalog_ref(catalog_table, catalog, catalog_property or [])
    output_for(as_json).published(Table.open(uri).publish(format, view=view, keep=keep, catalog=ref,
                                                          format_version=iceberg_format_version))
