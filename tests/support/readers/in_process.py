"""The readers that run in the project's own venv: pyiceberg, deltalake (its DataFusion QueryBuilder) and
polars. Each reads a table and returns a pyarrow Table as the library hands it over (types included:
polars and DataFusion give string views or large strings where others give strings; `normalized` in
tables.py evens that out for comparisons).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:  # imported when called: pyiceberg takes ~1 s to import, every test session loads this
    from pyiceberg.catalog import Catalog
    from pyiceberg.expressions import BooleanExpression


def _uri(path: str | Path) -> str:
    return path if isinstance(path, str) else str(path)


def pyiceberg_scan(source: str | Path | tuple[Catalog, str], snapshot: int | None = None,
                   row_filter: str | BooleanExpression | None = None) -> pa.Table:
    """An Iceberg table from a metadata file or `(catalog, "namespace.table")`, at `snapshot` (an id;
    None: the current one), optionally filtered (a pyiceberg expression or its string form)."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.table import StaticTable, Table

    if isinstance(source, tuple):
        catalog, identifier = source
        table: Table = catalog.load_table(identifier)
    else:
        table = StaticTable.from_metadata(_uri(source))
    return table.scan(row_filter=AlwaysTrue() if row_filter is None else row_filter,
                      snapshot_id=snapshot).to_arrow()


def deltalake_query(path: str | Path, version: int | None = None, sql: str = "SELECT * FROM t") -> pa.Table:
    """A Delta table through deltalake's QueryBuilder (DataFusion; the path that applies deletion vectors,
    which `to_pyarrow_table` refuses), registered as `t`, at `version` (None: the latest)."""
    from deltalake import DeltaTable, QueryBuilder

    table = DeltaTable(_uri(path), version=version)
    result = QueryBuilder().register("t", table).execute(sql).read_all()
    return pa.table(result)


def polars_delta(path: str | Path, version: int | None = None) -> pa.Table:
    """A Delta table through polars' `read_delta` (its own Parquet reader; deltalake reads the log only)."""
    import polars as pl

    return pl.read_delta(_uri(path), version=version).to_arrow()
