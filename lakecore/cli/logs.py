"""What a `weir` command shows of Python's logging on stderr.

Without --debug: the project's own warnings (lakecore, sparkjobs, lakeoperator), each as its bare
message, as Python shows them when nothing is configured; nothing from third-party libraries (kazoo's
reconnect attempts while ZooKeeper is down, urllib3's retries, py4j, fsspec, ...), whose failures reach
the user as the command's one-line error. With --debug: every logger from INFO up, named.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

FIRST_PARTY = frozenset({"lakecore", "sparkjobs", "lakeoperator"})


class CliLogHandler(logging.StreamHandler):
    """Writes to the stderr of the moment (a test runner swaps sys.stderr per command)."""

    def __init__(self, debug: bool) -> None:
        super().__init__(sys.stderr)
        self.debug = debug
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s" if debug
                                            else "%(message)s"))

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.debug and (record.levelno < logging.WARNING
                               or record.name.split(".")[0] not in FIRST_PARTY):
            return False
        return bool(super().filter(record))

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


def show_logs(debug: bool) -> Callable[[], None]:
    """Route logging to stderr as the module docstring says, for one command; returns the undo."""
    root = logging.getLogger()
    stop_cli_logging()
    handler = CliLogHandler(debug)
    level = root.level
    root.addHandler(handler)
    if debug and not logging.NOTSET < level <= logging.INFO:
        root.setLevel(logging.INFO)

    def undo() -> None:
        root.removeHandler(handler)
        root.setLevel(level)
    return undo


def stop_cli_logging() -> None:
    """Leave logging to a command that configures its own (`weir operator`: kopf's handler)."""
    root = logging.getLogger()
    for handler in [h for h in root.handlers if isinstance(h, CliLogHandler)]:
        root.removeHandler(handler)
