"""The table facade."""

from lakecore.table.table import Table
from lakecore.table.writer import WriteResult, WriterOptions

__all__ = ["Table", "WriteResult", "WriterOptions"]
