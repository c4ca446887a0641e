"""The table facade: `Table` (table.py), the driver side of one write (writer.py) and how this process
writes (options.py)."""

from lakecore.table.options import (
    AbortWatchOptions,
    AfterCommitOptions,
    ConflictOptions,
    FileOptions,
    MarkerOptions,
    RegistrationOptions,
    WriterOptions,
)
from lakecore.table.table import Table
from lakecore.table.writer import WriteJob, WriteResult

__all__ = ["AbortWatchOptions", "AfterCommitOptions", "ConflictOptions", "FileOptions", "MarkerOptions",
           "RegistrationOptions", "Table", "WriteJob", "WriteResult", "WriterOptions"]
