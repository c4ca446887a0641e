"""The out-of-process readers of one test session: DuckDB (+ iceberg/delta extensions), daft and Spark
4.1 (+ Iceberg runtime, Delta), each a long-running reader process in its own venv (workers.py).

Owns which engine runs where and the one call per engine that reads a table into a pyarrow Table. A
process starts on its engine's first call (Spark: ~8-10 s, DuckDB and daft: ~1 s) and lives until
close(); an engine whose environment is missing (`make readers`) is handed to `require`, which skips the
test locally and fails it under CI.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow as pa

from tests.support.readers.environments import (
    Environment,
    daft_environment,
    duckdb_environment,
    spark_environment,
)
from tests.support.readers.workers import ReaderProcess

Require = Callable[[str, str | None], None]
Engine = Literal["duckdb", "daft", "spark"]


@dataclass(frozen=True)
class CatalogTable:
    """An Iceberg table in a catalog, as Spark sees it: Spark catalog `name` (for a JDBC catalog, the
    pyiceberg SqlCatalog's name: rows are keyed by it) configured with Iceberg catalog `properties`
    (`type=rest, uri=http://...`, or `type=jdbc, uri=jdbc:sqlite:/path/catalog.db`), and the table's
    `identifier` in it ("namespace.table")."""

    name: str
    identifier: str
    properties: Mapping[str, str] = field(default_factory=dict)


def _path(value: str | Path) -> str:
    return value if isinstance(value, str) else str(value)


class Readers:
    """The session's reader processes, started on demand; close() stops them by pid."""

    def __init__(self, workdir: Path, require: Require) -> None:
        self.workdir = workdir
        self.require = require
        self._processes: dict[Engine, ReaderProcess] = {}

    def _environment(self, engine: Engine) -> tuple[Environment, dict[str, str]]:
        if engine == "duckdb":
            return duckdb_environment(), {}
        if engine == "daft":
            return daft_environment(), {}
        environment = spark_environment()
        return environment, {"PYSPARK_PYTHON": str(environment.python),
                             "PYSPARK_DRIVER_PYTHON": str(environment.python),
                             "SPARK_LOCAL_IP": "127.0.0.1",
                             "WEIR_SPARK_JARS": str(environment.jars),
                             "WEIR_SPARK_WORKDIR": str(self.workdir / "spark")}

    def process(self, engine: Engine) -> ReaderProcess:
        """The engine's reader process ("duckdb", "daft" or "spark"), started on first use (and again
        after it died: one crash fails one test, not the rest of the session's)."""
        if engine not in self._processes or not self._processes[engine].running:
            environment, env = self._environment(engine)
            self.require(f"the {engine} reader", environment.missing_reason())
            workdir = self.workdir / engine
            workdir.mkdir(parents=True, exist_ok=True)
            self._processes[engine] = ReaderProcess(engine, environment, workdir, env=env).start()
        return self._processes[engine]

    def duckdb_iceberg(self, metadata: str | Path, snapshot: int | None = None) -> pa.Table:
        """DuckDB's `iceberg_scan` of a metadata file, at `snapshot` (an id; None: the current one)."""
        return self.process("duckdb").call("iceberg", metadata=_path(metadata), snapshot=snapshot)

    def duckdb_delta(self, path: str | Path) -> pa.Table:
        """DuckDB's `delta_scan` of a Delta table's latest version."""
        return self.process("duckdb").call("delta", path=_path(path))

    def daft_iceberg(self, metadata: str | Path, snapshot: int | None = None) -> pa.Table:
        """daft's `read_iceberg` of a metadata file (through pyiceberg's StaticTable)."""
        return self.process("daft").call("iceberg", metadata=_path(metadata), snapshot=snapshot)

    def spark_iceberg(self, source: str | Path | CatalogTable, snapshot: int | None = None) -> pa.Table:
        """Spark + Iceberg's runtime: a metadata file, or a table through a catalog (REST, JDBC)."""
        if isinstance(source, CatalogTable):
            catalog = {"name": source.name, "properties": dict(source.properties)}
            return self.process("spark").call("iceberg", catalog=catalog, table=source.identifier,
                                              snapshot=snapshot)
        return self.process("spark").call("iceberg", metadata=_path(source), snapshot=snapshot)

    def spark_delta(self, path: str | Path, version: int | None = None) -> pa.Table:
        """Spark + Delta: a Delta table at `version` (None: the latest)."""
        return self.process("spark").call("delta", path=_path(path), version=version)

    def spark_sql(self, *statements: str) -> pa.Table:
        """Runs SQL statements in the reader's Spark (e.g. to write a table only Spark can write here:
        Iceberg position deletes, Delta deletion vectors); the last statement's result."""
        return self.process("spark").call("sql", statements=list(statements))

    def startup_lines(self) -> list[str]:
        """One line per started engine: its versions and start-up time."""
        return [f"{engine} reader: "
                + ", ".join(f"{name} {version}" for name, version in process.versions.items())
                + f"; ready in {process.startup_seconds:.1f} s"
                for engine, process in self._processes.items()]

    def close(self) -> None:
        for process in self._processes.values():
            process.stop()
        self._processes.clear()
