"""`weir`: create, write, read, inspect and maintain lake tables from a shell.

Human-readable output by default, `--json` for machines (cli/output.py: one output object per format,
one method per result kind). Every failure (lakecore errors, missing or unreadable files, bad input)
becomes one line on stderr that ends with what to do, and exit code 1 (`cli.errors` words it); with
`--json` that line is a JSON object; `--debug` (or WEIR_DEBUG=1) also prints the traceback. Nothing is
half-done because the library itself is atomic. What deletes data (clean, restore, rollback, repair)
is a dry run unless told. `check` and `repair` exit with the table's state besides (HEALTH_CODES: 2
repairable, 3 needs a human).

The commands live in cli/commands/ by what they do; importing them here registers them on `app`.
Other packages' commands (the operator's `weir run`, `weir demo`) join `app` with `friendly`, `out`,
`err` and `emit_json` from here.
"""

from __future__ import annotations

from lakecore.cli.app import app, fail, friendly, table_app
from lakecore.cli.commands import configure, inspect, maintain, publish, read, write
from lakecore.cli.consoles import emit_json, err, out

__all__ = [
    "app",
    "configure",
    "emit_json",
    "err",
    "fail",
    "friendly",
    "inspect",
    "main",
    "maintain",
    "out",
    "publish",
    "read",
    "table_app",
    "write",
]


def main() -> None:  # pragma: no cover - console entry point
    app()

