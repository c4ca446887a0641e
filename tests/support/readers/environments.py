"""Where the reader environments live, and whether each is built and up to date.

Owns the layout that `make readers` builds under `.tools/readers/` (ignored by git) from the pinned files
beside this module: a venv per reader whose pins conflict with the project's venv (DuckDB with its
extension wheels, daft, Spark 4.1), Spark's Iceberg and Delta jars, and Apache Iceberg's REST catalog
fixture with its runtime jars. Each part is built when its stamp is missing or older than the files it was
built from; the Makefile decides the same way. Nothing here builds or starts anything.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
TOOLS = ROOT / ".tools" / "readers"
STAMP = ".built"


def _pinned(pattern: str, path: Path) -> str:
    match = re.search(pattern, path.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{path} pins nothing matching {pattern!r}")
    return match.group(1)


def spark_version() -> str:
    """The pyspark version requirements-spark.txt pins (the Makefile reads it the same way)."""
    return _pinned(r"^pyspark==(\S+)", HERE / "requirements-spark.txt")


def iceberg_rest_version() -> str:
    """The Iceberg version of the REST catalog fixture (rest-catalog/pom.xml, property iceberg.version)."""
    return _pinned(r"<iceberg\.version>([^<]+)</iceberg\.version>", HERE / "rest-catalog" / "pom.xml")


@dataclass(frozen=True)
class Part:
    """One built piece: `stamp` is touched after a successful build from `sources`."""

    stamp: Path
    sources: tuple[Path, ...]

    def missing_reason(self) -> str | None:
        built = self.stamp.parent
        shown = built.relative_to(ROOT) if built.is_relative_to(ROOT) else built
        if not self.stamp.exists():
            return f"{shown} is not built: run `make readers`"
        if self.stamp.stat().st_mtime < max(source.stat().st_mtime for source in self.sources):
            return f"{shown} is older than its pins: run `make readers`"
        return None


@dataclass(frozen=True)
class Environment:
    """A reader's tools directory: a venv (`python`) and/or jars, built from pinned files."""

    name: str
    directory: Path
    parts: tuple[Part, ...]
    needs_java: bool = False

    @property
    def python(self) -> Path:
        return self.directory / "venv" / "bin" / "python"

    @property
    def jars(self) -> Path:
        return self.directory / "jars"

    def missing_reason(self) -> str | None:
        """Why this environment cannot be used here (None: built, newer than its pins, Java found)."""
        if self.needs_java and shutil.which("java") is None:
            return "java not found (install OpenJDK 17)"
        for part in self.parts:
            reason = part.missing_reason()
            if reason is not None:
                return reason
        return None


def _venv(directory: Path, requirements: str) -> Part:
    return Part(directory / "venv" / STAMP, (HERE / requirements,))


def _jars(directory: Path, pom: Path) -> Part:
    return Part(directory / "jars" / STAMP, (pom, pom.with_name("jars.sha256")))


def duckdb_environment() -> Environment:
    directory = TOOLS / "duckdb"
    return Environment("duckdb", directory, (_venv(directory, "requirements-duckdb.txt"),))


def daft_environment() -> Environment:
    directory = TOOLS / "daft"
    return Environment("daft", directory, (_venv(directory, "requirements-daft.txt"),))


def spark_environment() -> Environment:
    directory = TOOLS / f"spark-{spark_version()}"
    return Environment("spark", directory, (_venv(directory, "requirements-spark.txt"),
                                            _jars(directory, HERE / "spark" / "pom.xml")), needs_java=True)


def rest_catalog_environment() -> Environment:
    directory = TOOLS / f"iceberg-rest-{iceberg_rest_version()}"
    source = HERE / "rest-catalog"
    launcher = Part(directory / "classes" / STAMP, (source / "LoopbackRESTCatalogServer.java",))
    return Environment("iceberg-rest", directory, (_jars(directory, source / "pom.xml"), launcher),
                       needs_java=True)
