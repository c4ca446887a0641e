"""Shared bench helpers: the peers' data generator, timing, and result printing."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
# beside the repository (a worktree elsewhere names it in WEIR_PEERS)
PEERS = os.environ.get("WEIR_PEERS") or os.path.normpath(
    os.path.join(HERE, "..", "..", "shared", "bench", "peers"))


def datagen() -> Any:
    """The fixed-seed generator the peer figures were measured with (../shared/bench/peers)."""
    if PEERS not in sys.path:
        sys.path.insert(0, PEERS)
    import datagen as dg  # type: ignore[import-not-found]
    return dg


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def alternated(readers: dict[str, Callable[[], Any]], reps: int
               ) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Each of `readers` timed `reps` times, round after round, each going first in turn: (seconds per
    reader, what each returned last)."""
    runs: dict[str, list[float]] = {name: [] for name in readers}
    last: dict[str, Any] = {}
    names = list(readers)
    for rep in range(reps):
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            seconds, last[name] = timed(readers[name])
            runs[name].append(seconds)
    return runs, last
