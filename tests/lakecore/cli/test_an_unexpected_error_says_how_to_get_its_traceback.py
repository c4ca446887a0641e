"""A failure the CLI has no words for (a bug) is one line that names how to get the traceback, and
what it names works: WEIR_DEBUG=1 set anywhere (`--debug` is an option of `weir` itself, so a user
who appends it to the command gets a usage error instead)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from lakecore.cli.main import app
from lakecore.table import Table

runner = CliRunner()


@pytest.fixture
def broken_open(monkeypatch) -> None:
    def open_(*args, **kwargs):   # a bug injected where every table command starts
        raise KeyError("no such thing")
    monkeypatch.setattr(Table, "open", open_)


def test_the_line_names_weir_debug_and_it_gives_the_traceback(tmp_path, broken_open) -> None:
    uri = str(tmp_path / "t")
    result = runner.invoke(app, ["table", "read", uri], env={"WEIR_DEBUG": ""})
    assert result.exit_code == 1
    out = " ".join(result.output.split())
    assert "unexpected KeyError: 'no such thing'; rerun with WEIR_DEBUG=1 (or `weir --debug ...`)" in out, out
    assert "Traceback" not in result.output
    result = runner.invoke(app, ["table", "read", uri], env={"WEIR_DEBUG": "1"})
    assert result.exit_code == 1 and "Traceback (most recent call last)" in result.output
    result = runner.invoke(app, ["--debug", "table", "read", uri], env={"WEIR_DEBUG": ""})
    assert result.exit_code == 1 and "Traceback (most recent call last)" in result.output


def test_ctrl_c_is_said_and_exits_130(tmp_path, monkeypatch) -> None:
    """It used to end the command in silence (exit 130, not a word on whether anything was written)."""
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(Table, "open", interrupted)
    result = runner.invoke(app, ["table", "read", str(tmp_path / "t")])
    assert result.exit_code == 130
    assert "interrupted: what completed is on the table's timeline (`weir table timeline`)" in result.output
