"""The `weir` application object and what every command shares: the `table` group, --debug, the
options every command takes, and `friendly`, which turns any failure into one line (cli.errors words
it; the command's output prints it) and exit code 1.

Commands live in cli/commands/ by what they do; cli/main.py puts them together.
"""

from __future__ import annotations

import inspect
import os
import sys
import traceback
from collections.abc import Callable
from functools import wraps
from typing import Annotated, Any, NoReturn, TypeVar, get_args

import typer
from typer.core import TyperGroup

from lakecore.cli.consoles import say
from lakecore.cli.errors import describe as describe_error
from lakecore.cli.logs import show_logs
from lakecore.cli.output import output_for


class _Summarized(TyperGroup):
    """A command group whose listing (`weir --help`, `weir table --help`) gives each command the first
    sentence of its help, on one line: typer lists a command's whole first paragraph with its source
    line breaks kept, so the listing was ragged, and `check` took 12 lines. A command's own `--help`
    still shows all of it, its flags without a value type: typer labels each `<bool>` (`--yes <bool>`
    reads as if it took a value)."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:   # typer's own vendored click types
        command = super().get_command(ctx, cmd_name)
        if command is not None and command.short_help is None and command.help:
            command.short_help = summary(command.help)
        if command is not None:
            _untyped_flags(command.get_params(ctx))
        return command

    def get_params(self, ctx: Any) -> Any:
        return _untyped_flags(super().get_params(ctx))


def _untyped_flags(params: list[Any]) -> list[Any]:
    """Help as click writes it: `--buckets INTEGER`, `--record-key TEXT` (repeatable ones say so in
    their help), an argument by its name (`URI`), a flag bare. Typer would show each parameter's Python
    type (`<list[str]>`, `<bool>`) and an argument as `{uri}`."""
    for param in params:
        if param.metavar is not None or param.name is None:
            continue
        if getattr(param, "is_flag", False):
            param.metavar = ""   # typer shows the metavar in place of the type: none
        elif getattr(param, "param_type_name", "") == "argument":
            param.metavar = param.name.upper()
        elif getattr(param, "param_type_name", "") == "option":
            annotation = getattr(getattr(param, "type_descriptor", None), "annotation", str)
            element = (get_args(annotation) or (annotation,))[0]   # list[str]: str
            param.metavar = {int: "INTEGER", float: "FLOAT"}.get(element, "TEXT")
    return params


def summary(help_text: str) -> str:
    """The first sentence of `help_text`'s first paragraph, on one line."""
    first = " ".join(inspect.cleandoc(help_text).split("\n\n")[0].split())
    end = first.find(". ")
    return first if end < 0 else first[:end + 1]


app = typer.Typer(help="Weir: lake tables with a timeline, merge-on-read and multi-writer control.",
                  no_args_is_help=True, cls=_Summarized)
table_app = typer.Typer(help="Create, write, read, inspect and maintain one table. What deletes data "
                        "(clean, rollback, restore, repair) is a dry run unless told (--run, --yes).",
                        no_args_is_help=True, cls=_Summarized)
app.add_typer(table_app, name="table")

F = TypeVar("F", bound=Callable[..., Any])
JsonFlag = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]
Uri = Annotated[str, typer.Argument(help="Table location: a path, file://, s3:// or memory:// URI.")]

_debug = {"on": False}
Debug = Annotated[bool, typer.Option("--debug", help="On failure, print the traceback too.")]


def _print_version(wanted: bool) -> None:
    if wanted:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("weir")
        except PackageNotFoundError:   # run from a checkout that was never installed
            installed = "(not installed: a checkout on PYTHONPATH)"
        say(f"weir {installed}")
        raise typer.Exit()


Version = Annotated[bool, typer.Option("--version", help="Print weir's version and exit.",
                                       callback=_print_version, is_eager=True)]


@app.callback()
def _app_options(ctx: typer.Context, debug: Debug = False, show_version: Version = False) -> None:
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
    output_for(as_json).error(error)
    raise typer.Exit(1)


def friendly(fn: F) -> F:
    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):  # typer's own exits and usage errors
            raise
        except KeyboardInterrupt:   # Ctrl-C: said, not a silent exit
            print("interrupted: what completed is on the table's timeline (`weir table timeline`); a write "
                  "that had not committed is rolled back by the next write or clean", file=sys.stderr)
            raise typer.Exit(130) from None
        except Exception as exc:  # the CLI boundary: every failure becomes one line (--debug: traceback)
            fail(exc, uri=kwargs.get("uri"), as_json=bool(kwargs.get("as_json")))
    return wrapper  # type: ignore[return-value]
