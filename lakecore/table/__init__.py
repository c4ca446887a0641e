"""The table facade."""

from lakecore.table.table import Table
from lakecore.table.writer import WriteJob, WriteResult, WriterOptions

__all__ = ["Table", "WriteJob", "WriteResult", "WriterOptions"]
