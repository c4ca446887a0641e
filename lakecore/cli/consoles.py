"""Where `weir` prints: stdout and stderr of the moment (a test runner swaps them per command)."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

out = Console()
err = Console(stderr=True)


def emit_json(obj: Any) -> None:
    """One JSON document on stdout."""
    sys.stdout.write(json.dumps(obj, indent=2, default=str) + "\n")
