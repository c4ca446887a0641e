"""The table facade."""

from lakecore.table.table import Table, WriteResult

__all__ = ["Table", "WriteResult"]
