"""The `weir` console script (pyproject.toml's entry point): lakecore's `weir table ...` commands, which a
plain `pip install weir` runs, and the operator's commands (`run`, `get`, `describe`, `demo`, `operator`,
lakeoperator.cli), which need the `operator` extra.

Without that extra the operator's commands are still listed, as stand-ins that say which extra to install
(one line, exit 1), instead of the whole command crashing on a missing module at start-up.
"""

from __future__ import annotations

import typer

from lakecore.cli.errors import missing_extra
from lakecore.cli.main import app, friendly

OPERATOR_COMMANDS = ("run", "get", "describe", "demo", "operator")


def _stand_in(name: str, missing: ModuleNotFoundError) -> None:
    extra = (missing_extra(missing) or ("", "operator"))[1]

    # help is rich markup: "\\[" keeps "[operator]" from reading as a style
    @app.command(name, help=f"Needs the `{extra}` extra: pip install 'weir\\[{extra}]'.",
                 context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
    @friendly
    def needs_extra(ctx: typer.Context) -> None:
        raise ModuleNotFoundError(str(missing), name=missing.name)


try:
    import lakeoperator.cli  # noqa: F401  (registers the operator's commands on `app`)
except ModuleNotFoundError as exc:
    if missing_extra(exc) is None:  # a module no extra installs: a packaging bug, not the user's to fix
        raise
    registered = {c.name for c in app.registered_commands}
    for command in OPERATOR_COMMANDS:
        if command not in registered:
            _stand_in(command, exc)


def main() -> None:  # pragma: no cover - console entry point
    app()
