"""A real Iceberg REST catalog server for tests: Apache Iceberg's REST catalog test fixture (Maven Central,
`make readers`) run as a Java process on a free 127.0.0.1 port.

Owns one server: its backend is the fixture's JdbcCatalog on an SQLite file in `workdir`, its warehouse
`workdir/warehouse`, its output in `workdir/rest-catalog.log`; started in its own process group and
stopped by pid. Clients: pyiceberg's RestCatalog (`catalog()`), Spark through `spark_table()`.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.kube_server import Component
from tests.support.readers.environments import Environment, rest_catalog_environment
from tests.support.readers.session import CatalogTable
from tests.support.zookeeper import HOST, free_port, java_executable

if TYPE_CHECKING:
    from pyiceberg.catalog.rest import RestCatalog

MAIN_CLASS = "org.apache.iceberg.rest.LoopbackRESTCatalogServer"


class RestCatalogServer:
    """The REST catalog fixture in `workdir`; a context manager. `startup_seconds`: until it answered."""

    def __init__(self, workdir: Path, environment: Environment | None = None) -> None:
        self.workdir = workdir
        self.environment = environment or rest_catalog_environment()
        self.warehouse = workdir / "warehouse"
        self.port = free_port()
        self.startup_seconds = 0.0
        classpath = f"{self.environment.directory / 'classes'}:{self.environment.jars / '*'}"
        self.component = Component("rest-catalog", [
            java_executable() or "java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", classpath, MAIN_CLASS,
            f"uri=jdbc:sqlite:{workdir / 'catalog.db'}", f"warehouse={self.warehouse.as_uri()}",
            f"rest.host={HOST}", f"rest.port={self.port}",
        ], workdir / "rest-catalog.log")

    @property
    def uri(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self, timeout: float = 60) -> RestCatalogServer:
        self.warehouse.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        self.component.start()
        try:
            while not self._answers():
                self.component.check_alive()
                if time.monotonic() - started > timeout:
                    raise RuntimeError(
                        f"the REST catalog did not answer on {self.uri} within {timeout:.0f} s; "
                        f"the end of {self.component.log_path}:\n{self.component.log_tail()}")
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/v1/config", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError):
            return False

    @property
    def pid(self) -> int | None:
        process = self.component.process
        return None if process is None else process.pid

    def stop(self) -> None:
        self.component.stop()

    def __enter__(self) -> RestCatalogServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def catalog(self, name: str = "rest") -> RestCatalog:
        """pyiceberg's REST client for this server."""
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog(name, uri=self.uri)

    def spark_table(self, identifier: str, name: str = "rest") -> CatalogTable:
        """`identifier` ("namespace.table") in this catalog, for `Readers.spark_iceberg`."""
        return CatalogTable(name, identifier, {"type": "rest", "uri": self.uri})
