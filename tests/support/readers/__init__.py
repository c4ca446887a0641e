"""Other engines reading tables, for interoperability tests: one call per engine that reads an Iceberg
or Delta table and returns a pyarrow Table.

In the project's venv (in_process.py): `pyiceberg_scan`, `deltalake_query`, `polars_delta`. In venvs of
their own, built by `make readers` under .tools/readers/ (session.py, one long-running process per
engine, results passed back as Arrow IPC files): `Readers.duckdb_iceberg`, `duckdb_delta`,
`daft_iceberg`, `spark_iceberg` (a metadata file or a catalog), `spark_delta`. `RestCatalogServer` runs
Apache Iceberg's REST catalog fixture. The pytest fixtures `readers` and `rest_catalog` are in
tests/support/fixtures.py; `normalized` (tables.py) compares results across engines.
"""

from tests.support.readers.in_process import deltalake_query, polars_delta, pyiceberg_scan
from tests.support.readers.rest_catalog import RestCatalogServer
from tests.support.readers.session import CatalogTable, Readers
from tests.support.readers.tables import normalized
from tests.support.readers.workers import ReaderError, ReaderProcessDied

__all__ = ["CatalogTable", "ReaderError", "ReaderProcessDied", "Readers", "RestCatalogServer",
           "deltalake_query", "normalized", "polars_delta", "pyiceberg_scan"]
