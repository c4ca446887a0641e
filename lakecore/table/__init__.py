"""The table facade: `Table` (table.py), the driver side of one write (writer.py), how this process
writes (options.py) and the table's maintenance in one place (maintenance.py)."""

from lakecore.table.maintenance import Maintenance, MaintenanceResult
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

__all__ = ["AbortWatchOptions", "AfterCommitOptions", "ConflictOptions", "FileOptions", "Maintenance",
           "MaintenanceResult", "MarkerOptions", "RegistrationOptions", "Table", "WriteJob", "WriteResult",
           "WriterOptions"]
