"""`weir --help` and `weir table --help` list each command with the first sentence of its help, on one
line at any width: typer listed a command's whole first paragraph with its source line breaks kept
(a ragged listing; `check` took 12 lines with its exit codes). A command's own `--help` still says
everything."""

from __future__ import annotations

import os
import subprocess
import sys

from lakecore.cli.app import summary


def weir(*args: str, columns: int) -> str:
    done = subprocess.run([sys.executable, "-c", "from lakeoperator.console import app; app()", *args],
                          env={**os.environ, "COLUMNS": str(columns)}, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def listed(text: str) -> dict[str, str]:
    """Each command of a help's Commands panel and its help, as one line."""
    panel = text[text.index("Commands"):]
    entries: dict[str, list[str]] = {}
    name = ""
    for line in panel.splitlines()[1:]:
        cells = line.strip("│╰─╯ ").split(None, 1)
        if not cells:
            continue
        if line.startswith("│ ") and not line.startswith("│  "):   # a new command
            name = cells[0]
            entries[name] = cells[1:]
        elif name:
            entries[name].append(line.strip("│ "))
    return {k: " ".join(" ".join(v).split()) for k, v in entries.items()}


def test_the_listings_give_each_command_one_sentence() -> None:
    table = listed(weir("table", "--help", columns=400))
    assert {"create", "set-lock", "check", "repair", "read", "upsert", "publish"} <= set(table), table
    assert table["set-lock"] == ("Change the lock every writer of the table takes, holding the old lock and "
                                 "the new one meanwhile."), table["set-lock"]
    assert "Exit codes" not in table["check"] and table["check"].endswith("decodes every page)."), table
    assert "weir table repair" not in " ".join(table.values())
    top = listed(weir("--help", columns=400))
    assert {"run", "get", "describe", "table"} <= set(top), top
    assert top["table"] == "Create, write, read, inspect and maintain one table.", top["table"]
    narrow = weir("table", "--help", columns=80)
    assert max(len(line) for line in narrow.splitlines()) <= 80, narrow
    assert listed(narrow)["set-lock"] == table["set-lock"]


def test_a_commands_own_help_says_everything() -> None:
    text = " ".join(weir("table", "check", "--help", columns=120).replace("│", " ").split())
    assert "Verify the table (read-only)" in text and "Exit codes" in text and "3 a problem a human" in text


def test_the_summary_is_the_first_sentence_on_one_line() -> None:
    assert summary("Do this\n  and that. Then more.\n\nA second paragraph.") == "Do this and that."
    assert summary("No full stop (e.g.x) here\nat all") == "No full stop (e.g.x) here at all"


def test_weir_version_says_the_installed_version() -> None:
    from importlib.metadata import version

    assert weir("--version", columns=80) == f"weir {version('weir')}\n"


def test_flags_show_no_value_type_and_rollbacks_dry_run_no_false_default() -> None:
    """typer labels every option with its type: a flag read `--yes <bool>`, as if it took a value; and
    rollback's `--dry-run` said `[default: no-dry-run]` beside "the default without --yes"."""
    for args in ((), ("table",), ("table", "rollback"), ("table", "read"), ("run",), ("get",)):
        text = weir(*args, "--help", columns=120)
        assert "<bool>" not in text, (args, text)
    rollback = " ".join(weir("table", "rollback", "--help", columns=120).replace("│", " ").split())
    assert "--yes Do it" in rollback and "<str> Table location" in rollback, rollback
    assert "no-dry-run" not in rollback and "--no-force" not in rollback, rollback


def test_options_show_click_type_names_and_arguments_their_name() -> None:
    """typer 0.29 labels an option by its Python annotation (`--record-key <list[str]>`) and writes a
    required argument as `{uri}` in the usage line."""
    create = " ".join(weir("table", "create", "--help", columns=120).replace("│", " ").split())
    assert "table create [OPTIONS] {URI}" in create, create
    assert "--record-key TEXT Key column" in create and "--buckets INTEGER Buckets" in create, create
    assert "--tombstone-retention-hours FLOAT" in create and "list[" not in create, create
    for args in (("table", "read"), ("table", "upsert"), ("run",), ("get",)):
        text = weir(*args, "--help", columns=120)
        assert "list[" not in text and "{uri}" not in text and "<int>" not in text, (args, text)
