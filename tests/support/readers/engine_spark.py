"""Spark 4.1 with Apache Iceberg's Spark runtime and Delta's Spark jars, run by serve.py in the spark venv.

One local SparkSession (2 cores) for the reader process's life; serve.py's parent passes the jars
directory and a work directory in WEIR_SPARK_JARS / WEIR_SPARK_WORKDIR. Iceberg tables are read from a
metadata file (Iceberg's HadoopTables loads a `*.metadata.json` path as a static table) or through a
catalog; catalogs are configured on a new session each time (`newSession()` shares the SparkContext but
not the catalogs), so two tests may use one catalog name with different servers.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

_spark: SparkSession | None = None
EXTENSIONS = ("org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions,"
              "io.delta.sql.DeltaSparkSessionExtension")


def _session() -> SparkSession:
    assert _spark is not None, "start() first"
    return _spark


def start() -> dict[str, str]:
    global _spark
    jars = sorted(str(jar) for jar in Path(os.environ["WEIR_SPARK_JARS"]).glob("*.jar"))
    workdir = Path(os.environ["WEIR_SPARK_WORKDIR"])
    _spark = (SparkSession.builder.master("local[2]").appName("weir-readers")
              .config("spark.jars", ",".join(jars))
              .config("spark.driver.memory", "1g")
              # the C1 compiler only: starts and warms up in half the time; the tables are small
              .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
              .config("spark.ui.enabled", "false")
              .config("spark.ui.showConsoleProgress", "false")
              .config("spark.local.dir", str(workdir / "local"))
              .config("spark.sql.warehouse.dir", str(workdir / "warehouse"))
              .config("spark.sql.catalogImplementation", "in-memory")
              .config("spark.sql.session.timeZone", "UTC")
              .config("spark.sql.shuffle.partitions", "2")
              .config("spark.default.parallelism", "2")
              .config("spark.databricks.delta.snapshotPartitions", "2")
              .config("spark.sql.extensions", EXTENSIONS)
              .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
              .getOrCreate())
    _spark.sparkContext.setLogLevel("WARN")
    versions = {"spark": _spark.version}
    for name, pattern in (("iceberg", r"iceberg-spark-runtime-.*-([\d.]+)\.jar"),
                          ("delta", r"delta-spark_.*-([\d.]+)\.jar")):
        versions[name] = next(match.group(1) for jar in jars if (match := re.search(pattern, jar)))
    return versions


def stop() -> None:
    if _spark is not None:
        _spark.stop()


def _arrow(frame: DataFrame) -> pa.Table:
    table: pa.Table = frame.toArrow()
    return table


def iceberg(metadata: str | None = None, snapshot: int | None = None,
            catalog: dict[str, Any] | None = None, table: str | None = None) -> pa.Table:
    if catalog is None:
        reader = _session().read.format("iceberg")
        if snapshot is not None:  # Iceberg 1.12 refuses its own `snapshot-id` option
            reader = reader.option("versionAsOf", snapshot)
        return _arrow(reader.load(metadata))
    session = _session().newSession()
    name = catalog["name"]
    session.conf.set(f"spark.sql.catalog.{name}", "org.apache.iceberg.spark.SparkCatalog")
    for key, value in catalog["properties"].items():
        session.conf.set(f"spark.sql.catalog.{name}.{key}", value)
    as_of = "" if snapshot is None else f" VERSION AS OF {int(snapshot)}"
    return _arrow(session.sql(f"SELECT * FROM {name}.{table}{as_of}"))


def delta(path: str, version: int | None = None) -> pa.Table:
    reader = _session().read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return _arrow(reader.load(path))


def sql(statements: list[str]) -> pa.Table:
    """Runs the statements in order; the last one's result (an empty table for DDL/DML)."""
    frame = None
    for statement in statements:
        frame = _session().sql(statement)
    return _arrow(frame) if frame is not None else pa.table({})
