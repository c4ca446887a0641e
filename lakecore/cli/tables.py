"""How the CLI lays out a table of rows for a console of a given width (pure: values in, a rich Table out).

Identifiers (names, instant times, submission ids, paths) are what users copy into the next command
(`rollback`, `--as-of`, `describe`): they are never cut, folded or ellipsized, and neither are numbers.
Text columns wrap; optional columns (`drop`) are left out when the table would not fit otherwise. A table
whose identifiers alone are wider than the console is rendered wider than the console (the terminal
wraps the lines): still nothing is cut. `show_table` prints one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.console import Console
from rich.padding import Padding
from rich.segment import Segment, Segments
from rich.table import Table as RichTable
from rich.text import Text

Kind = Literal["id", "number", "text"]
TEXT_MIN = 8        # a text column may be squeezed (its words folded) down to this


@dataclass(frozen=True)
class Col:
    header: str
    kind: Kind = "text"   # id, number: never cut (a number right-justified); text: wraps
    drop: int = 0         # > 0: dropped when the table would not fit otherwise, the highest first

    @property
    def whole(self) -> bool:
        return self.kind in ("id", "number")


@dataclass(frozen=True)
class Fitted:
    table: RichTable
    width: int              # the width it is rendered at (the console's, unless the identifiers need more)
    dropped: tuple[str, ...] = ()


def fit_table(columns: Sequence[Col], rows: Sequence[Sequence[str]], width: int, *,
              title: str | None = None, header: bool = True) -> Fitted:
    """Lay out `rows` under `columns` in at most `width` cells (see the module docstring)."""
    cells = [[c.header, *(r[i] for r in rows)] for i, c in enumerate(columns)]
    natural = [max(cell_len(v) for v in column) for column in cells]
    word = [max(cell_len(w) for v in column for w in v.split() or [""]) for column in cells]
    # a whole column is as wide as its widest value (its header may wrap); a text one may fold
    least = [max([*(cell_len(r[i]) for r in rows), *(cell_len(w) for w in c.header.split())]) if c.whole
             else min(natural[i], TEXT_MIN) for i, c in enumerate(columns)]
    keep = list(range(len(columns)))

    def need(widths: Sequence[int]) -> int:   # cells between columns; none at the table's edges
        return sum(widths[i] for i in keep) + 2 * (len(keep) - 1)

    while need(least) > width and any(columns[i].drop for i in keep):
        keep.remove(max((i for i in keep if columns[i].drop), key=lambda i: (columns[i].drop, i)))
    widths = list(natural)
    if need(widths) > width:
        whole_words = _grow(least, word, keep, width - need(least))   # first: no word folded
        widths = _grow(whole_words, natural, keep, width - need(whole_words))
    # a title is one line when the width allows (rich wraps it to the table's width otherwise)
    table = RichTable(box=None, title=title, pad_edge=False, show_header=header,
                      min_width=min(width, cell_len(title)) if title else None)
    for i in keep:
        c = columns[i]
        table.add_column(c.header, width=widths[i], overflow="fold",
                         justify="right" if c.kind == "number" else "left")
    for r in rows:
        table.add_row(*(Text(r[i]) for i in keep))   # Text: a value is never read as rich markup
    return Fitted(table, max(width, need(widths)),
                  tuple(columns[i].header for i in range(len(columns)) if i not in keep))


def _grow(widths: Sequence[int], target: Sequence[int], keep: Sequence[int], spare: int) -> list[int]:
    """`widths` grown towards `target` by at most `spare` cells in all: the columns that lack least first
    (the fewest columns left short)."""
    out = list(widths)
    for i in sorted(keep, key=lambda i: target[i] - widths[i]):
        grow = min(max(0, target[i] - out[i]), max(0, spare))
        out[i] += grow
        spare -= grow
    return out


def show_table(console: Console, columns: Sequence[Col], rows: Sequence[Sequence[str]], *,
               title: str | None = None, header: bool = True, indent: int = 0) -> Fitted:
    """Print `rows` fitted to the console's width (wider, uncropped, when the identifiers need it), with
    no trailing blanks on the lines. Piped into a file, a log or `grep` (no terminal, no COLUMNS set),
    the table has its natural width, as kubectl's: no value is folded onto a second line."""
    fitted = fit_table(columns, rows, table_width(console) - indent, title=title, header=header)
    shown = Padding(fitted.table, (0, 0, 0, indent), expand=False) if indent else fitted.table
    lines = console.render_lines(shown, console.options.update_width(fitted.width + indent), pad=False)
    out: list[Segment] = []
    for line in lines:
        out.extend(_rstrip(line))
        out.append(Segment.line())
    console.print(Segments(out), crop=False, end="")
    return fitted


def table_width(console: Console) -> int:
    """The width tables are fitted to: the terminal's, COLUMNS, or a width given to the console itself
    (rich keeps it in `_width`; rich otherwise guesses 80 for a pipe); else no limit."""
    given = getattr(console, "_width", None) is not None or bool(os.environ.get("COLUMNS", "").strip())
    return console.width if console.is_terminal or given else UNLIMITED


UNLIMITED = 1 << 16   # cells: wider than any table's natural width


def _rstrip(line: list[Segment]) -> list[Segment]:
    line = list(line)
    while line and not line[-1].control and not line[-1].text.strip():
        line.pop()
    if line and not line[-1].control:
        last = line[-1]
        line[-1] = Segment(last.text.rstrip(), last.style)
    return line
