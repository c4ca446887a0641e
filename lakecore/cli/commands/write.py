"""`weir table upsert|insert|delete|overwrite|write`: one file written into the table as one instant."""

from __future__ import annotations

from typing import Annotated

import typer

from lakecore.cli.app import JsonFlag, Uri, friendly, table_app
from lakecore.cli.consoles import emit_json, say
from lakecore.cli.io import read_input
from lakecore.cli.output import output_for
from lakecore.errors import InvalidInput
from lakecore.table import FileOptions, RegistrationOptions, Table, WriterOptions
from lakecore.write import OPERATIONS, check_operation

CLI_WRITER = "weir CLI"   # who wrote, in the commit and in an aborted write's record: one timeline lane


def _write(uri: str, files: tuple[str | None, str | None], operation: str, as_json: bool,
           evolve: bool = False) -> None:
    """`files`: the input as the FILE argument and as --input (one of them, or both alike)."""
    given = {f for f in files if f}
    if len(given) != 1:
        raise InvalidInput(f"give the file to {operation}: `weir table ... URI FILE` or `--input FILE`"
                           if not given else f"two input files given ({', '.join(sorted(given))}); a write "
                           "reads one: give it once")
    input_file = given.pop()
    operation = check_operation(operation)  # a wrong name fails before the table is even opened
    t = Table.open(uri, options=WriterOptions(files=FileOptions(evolve_schema=evolve),
                                              registration=RegistrationOptions(writer_name=CLI_WRITER)))
    before = set(t.schema.names)
    data = read_input(input_file, t.schema)
    if data.num_rows == 0 and operation != "insert_overwrite_table":   # (which empties the table)
        if as_json:
            emit_json({"instant": None, "completed": None, "records": 0, "rows_written": 0, "delete_keys": 0,
                       "file_groups": 0, "added_columns": []})
        else:
            say(f"{operation}: {input_file} has no rows; nothing written (no instant)")
        return
    result = t.write(data, operation, extra={"writer": CLI_WRITER})
    output_for(as_json).written(operation, result, [f for f in t.schema if f.name not in before])


InputArg = Annotated[str | None, typer.Argument(
    metavar="FILE", help="Parquet, CSV or JSON-lines file (or --input FILE); CSV and JSON timestamps "
    "without a zone offset are read as UTC.", show_default=False)]
InputFile = Annotated[str | None, typer.Option("--input", "-i", help="Parquet, CSV or JSON-lines file (CSV "
                                               "and JSON timestamps without a zone offset: UTC).")]
EvolveFlag = Annotated[bool, typer.Option(
    "--evolve-schema", help="Add the input's columns the table lacks to the table (nullable: the rows "
    "written before read them as null); without it such an input is refused.")]


@table_app.command("upsert")
@friendly
def upsert(uri: Uri, file: InputArg = None, input_file: InputFile = None, evolve: EvolveFlag = False,
           as_json: JsonFlag = False) -> None:
    """Insert new and update existing records from a file."""
    _write(uri, (file, input_file), "upsert", as_json, evolve)


@table_app.command("insert")
@friendly
def insert(uri: Uri, file: InputArg = None, input_file: InputFile = None,
           bulk: Annotated[bool, typer.Option(help="Bulk insert (fast initial load).")] = False,
           evolve: EvolveFlag = False, as_json: JsonFlag = False) -> None:
    """Insert records from a file."""
    _write(uri, (file, input_file), "bulk_insert" if bulk else "insert", as_json, evolve)


@table_app.command("delete")
@friendly
def delete(uri: Uri, file: InputArg = None, input_file: InputFile = None, as_json: JsonFlag = False) -> None:
    """Delete the records whose keys are in a file."""
    _write(uri, (file, input_file), "delete", as_json)


@table_app.command("overwrite")
@friendly
def overwrite(uri: Uri, file: InputArg = None, input_file: InputFile = None,
              whole_table: Annotated[bool, typer.Option(
                  "--table", help="Replace the whole table (insert_overwrite_table), not only the "
                  "partitions the input touches (insert_overwrite).")] = False,
              evolve: EvolveFlag = False, as_json: JsonFlag = False) -> None:
    """Replace the partitions the input touches (or, with --table, the whole table) with its rows."""
    _write(uri, (file, input_file), "insert_overwrite_table" if whole_table else "insert_overwrite", as_json,
           evolve)


@table_app.command("write")
@friendly
def write(uri: Uri, file: InputArg = None, input_file: InputFile = None,
          operation: Annotated[str, typer.Option(help=f"One of {'|'.join(OPERATIONS)}.")] = "upsert",
          evolve: EvolveFlag = False, as_json: JsonFlag = False) -> None:
    """Write a file with any write operation (what the LakeWriter's `operation` names)."""
    _write(uri, (file, input_file), operation, as_json, evolve)
