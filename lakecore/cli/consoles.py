"""Where `weir` prints: stdout and stderr of the moment (a test runner swaps them per command)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.text import Text

out = Console()
err = Console(stderr=True)


def say(text: str | Text, *, stderr: bool = False) -> None:
    """One line of `weir`'s own output on stdout (or stderr), as written: not read as rich markup (a
    path or a column name such as `t[red]x` prints whole) and not wrapped (piped into a log or `grep`, a
    line stays one line; a terminal wraps it itself)."""
    (err if stderr else out).print(text, highlight=False, soft_wrap=True, markup=False)


def emit_json(obj: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
