"""DuckDB 1.4.4 with its Iceberg, Delta and Avro extensions, run by serve.py in the duckdb venv.

The extension binaries come inside the `duckdb-ext-*` wheels (site-packages/duckdb_ext/extensions/
v<version>/<platform>/); DuckDB loads them from there and never tries the network
(`autoinstall_known_extensions` off). Session time zone UTC, so timestamptz columns come back as UTC.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import duckdb_ext
import pyarrow as pa

_connection: duckdb.DuckDBPyConnection | None = None
EXTENSIONS = ("avro", "iceberg", "delta")


def start() -> dict[str, str]:
    global _connection
    directory = Path(next(iter(duckdb_ext.__path__))) / "extensions"
    _connection = duckdb.connect(config={"extension_directory": str(directory),
                                         "autoinstall_known_extensions": False,
                                         "autoload_known_extensions": False})
    for name in EXTENSIONS:
        _connection.load_extension(name)
    _connection.execute("SET TimeZone = 'UTC'")
    loaded = dict(_connection.sql("SELECT extension_name, extension_version FROM duckdb_extensions() "
                                  f"WHERE extension_name IN {EXTENSIONS}").fetchall())
    return {"duckdb": duckdb.__version__, **{name: str(loaded[name]) for name in EXTENSIONS}}


def stop() -> None:
    if _connection is not None:
        _connection.close()


def _query(sql: str, *parameters: object) -> pa.Table:
    assert _connection is not None, "start() first"
    return _connection.execute(sql, list(parameters)).fetch_arrow_table()


def iceberg(metadata: str, snapshot: int | None = None) -> pa.Table:
    if snapshot is None:
        return _query("SELECT * FROM iceberg_scan(?)", metadata)
    return _query("SELECT * FROM iceberg_scan(?, snapshot_from_id => ?)", metadata, snapshot)


def delta(path: str) -> pa.Table:
    return _query("SELECT * FROM delta_scan(?)", path)
