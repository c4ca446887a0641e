"""A table's title (`people: 3 rows`) is one line whenever the console is wide enough for it, also when the
table's columns are narrower than the title (rich wraps a title to its table's width otherwise)."""

from __future__ import annotations

import io

from rich.console import Console

from lakecore.cli.tables import Col, show_table


def render(width: int, title: str) -> list[str]:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
    show_table(console, (Col("id", "id"), Col("ts", "number"), Col("name")),
               [("2", "1", "Grace"), ("1", "1", "Ada")], title=title)
    return buffer.getvalue().splitlines()


def test_a_title_wider_than_the_columns_is_one_line() -> None:
    lines = render(80, "people: 3 rows")
    assert lines[0].strip() == "people: 3 rows", lines
    assert lines[1].split() == ["id", "ts", "name"], lines


def test_a_title_wider_than_the_console_still_wraps() -> None:
    lines = render(10, "people: 3 rows")
    assert "people: 3 rows" not in "\n".join(lines)
    assert any(line.split() == ["id", "ts", "name"] for line in lines), lines
