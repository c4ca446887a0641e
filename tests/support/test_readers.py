"""Every reader of tests/support/readers returns what the table's writer reads back.

An Iceberg table written by pyiceberg (SQL catalog, partitioned, appends, a copy-on-write delete) and a
Delta table written by deltalake (partitioned, appends, a delete) are read by every engine, at every
snapshot/version the engine can travel to; Parquet files without field ids need the name mapping.
pyiceberg and deltalake write no position deletes or deletion vectors: Spark writes them (Iceberg v2
position-delete files, Iceberg v3 deletion vectors, Delta deletion vectors), and the other readers must
apply them. Spark also reads through pyiceberg's SQL catalog and through Apache Iceberg's REST catalog
server.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pytest

from tests.support.readers import (
    CatalogTable,
    ReaderError,
    Readers,
    RestCatalogServer,
    deltalake_query,
    normalized,
    polars_delta,
    pyiceberg_scan,
)

pytestmark = [pytest.mark.readers, pytest.mark.slow]

CATALOG = "weir"


def rows(ids: range, part: str) -> pa.Table:
    """Rows of every type the publishers map, one partition value."""
    n = len(ids)
    return pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "part": pa.array([part] * n, pa.string()),
        "small": pa.array([i % 100 for i in ids], pa.int32()),
        "price": pa.array([decimal.Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
        "score": pa.array([i / 3 for i in ids], pa.float64()),
        "flag": pa.array([i % 2 == 0 for i in ids], pa.bool_()),
        "name": pa.array([None if i % 5 == 0 else f"name-{i}" for i in ids], pa.string()),
        "day": pa.array([dt.date(2026, 11, 1) + dt.timedelta(days=i % 30) for i in ids], pa.date32()),
        "at": pa.array([dt.datetime(2026, 11, 26, 8, 0) + dt.timedelta(seconds=i) for i in ids],
                       pa.timestamp("us")),
        "at_utc": pa.array([dt.datetime(2026, 11, 26, 8, 0, tzinfo=dt.UTC) + dt.timedelta(milliseconds=i)
                            for i in ids], pa.timestamp("us", tz="UTC")),
        "payload": pa.array([str(i).encode() for i in ids], pa.binary()),
    })


def assert_same_rows(actual: pa.Table, expected: pa.Table) -> None:
    actual, expected = normalized(actual), normalized(expected)
    assert actual.schema == expected.schema
    assert actual.num_rows == expected.num_rows
    assert actual.equals(expected)


# --- an Iceberg table written by pyiceberg ---------------------------------------------------------------

@dataclass(frozen=True)
class IcebergHistory:
    """A pyiceberg-written table: its metadata file, each snapshot, and what pyiceberg reads at each."""

    metadata: str
    catalog_db: Path
    identifier: str
    expected: dict[int | None, pa.Table]


@pytest.fixture(scope="module")
def iceberg_history(tmp_path_factory: pytest.TempPathFactory) -> IcebergHistory:
    from pyiceberg.catalog.sql import SqlCatalog

    root = tmp_path_factory.mktemp("iceberg")
    catalog = SqlCatalog(CATALOG, uri=f"sqlite:///{root / 'catalog.db'}", warehouse=root.as_uri())
    catalog.create_namespace("db")
    first = rows(range(0, 40), "a")
    table = catalog.create_table("db.events", schema=first.schema, properties={"format-version": "2"})
    with table.update_spec() as spec:
        spec.add_identity("part")
    table.append(first)
    table.append(pa.concat_tables([rows(range(40, 60), "a"), rows(range(60, 90), "b")]))
    table.delete("id >= 10 AND id < 20 OR id = 65")  # copy-on-write: rewrites the files it touches
    table.append(rows(range(90, 100), "c"))
    table = catalog.load_table("db.events")
    assert [s.summary.operation.value for s in table.snapshots() if s.summary] == \
        ["append", "append", "overwrite", "append"]
    expected: dict[int | None, pa.Table] = {None: table.scan().to_arrow()}
    for snapshot in table.snapshots():
        expected[snapshot.snapshot_id] = table.scan(snapshot_id=snapshot.snapshot_id).to_arrow()
    assert expected[None].num_rows == 100 - 11
    return IcebergHistory(table.metadata_location, root / "catalog.db", "db.events", expected)


IcebergReader = Callable[[Readers, str, "int | None"], pa.Table]
ICEBERG_READERS: dict[str, IcebergReader] = {
    "pyiceberg": lambda readers, metadata, snapshot: pyiceberg_scan(metadata, snapshot),
    "duckdb": lambda readers, metadata, snapshot: readers.duckdb_iceberg(metadata, snapshot),
    "daft": lambda readers, metadata, snapshot: readers.daft_iceberg(metadata, snapshot),
    "spark": lambda readers, metadata, snapshot: readers.spark_iceberg(metadata, snapshot),
}


@pytest.mark.parametrize("reader", ICEBERG_READERS)
def test_iceberg_readers_return_pyicebergs_rows_at_every_snapshot(
        reader: str, readers: Readers, iceberg_history: IcebergHistory) -> None:
    for snapshot, expected in iceberg_history.expected.items():
        actual = ICEBERG_READERS[reader](readers, iceberg_history.metadata, snapshot)
        assert_same_rows(actual, expected)


def test_spark_reads_through_pyicebergs_sql_catalog(readers: Readers,
                                                    iceberg_history: IcebergHistory) -> None:
    table = CatalogTable(CATALOG, iceberg_history.identifier,
                         {"type": "jdbc", "uri": f"jdbc:sqlite:{iceberg_history.catalog_db}",
                          "warehouse": iceberg_history.catalog_db.parent.as_uri()})
    assert_same_rows(readers.spark_iceberg(table), iceberg_history.expected[None])


@pytest.fixture(scope="module")
def name_mapped(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, pa.Table]:
    """Parquet files without field ids registered by pyiceberg's add_files: readers must apply the
    table's name mapping (`schema.name-mapping.default`), as for Weir's files written before field ids."""
    import pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog

    root = tmp_path_factory.mktemp("name-mapped")
    catalog = SqlCatalog(CATALOG, uri=f"sqlite:///{root / 'catalog.db'}", warehouse=root.as_uri())
    catalog.create_namespace("db")
    files = [root / "a.parquet", root / "b.parquet"]
    for number, path in enumerate(files):
        pq.write_table(rows(range(number * 10, number * 10 + 10), "a"), path)
    assert pq.read_schema(files[0]).field("id").metadata is None, "no field ids"
    table = catalog.create_table("db.files", schema=pq.read_schema(files[0]))
    table.add_files([str(path) for path in files])
    table = catalog.load_table("db.files")
    assert "schema.name-mapping.default" in table.properties
    return table.metadata_location, table.scan().to_arrow()


DAFT_NAME_MAPPING = pytest.mark.xfail(raises=ReaderError, strict=True,
                                      reason="daft 0.7.26 refuses Parquet files without field ids")


@pytest.mark.parametrize("reader", [pytest.param(name, marks=DAFT_NAME_MAPPING) if name == "daft" else name
                                    for name in ICEBERG_READERS])
def test_iceberg_readers_apply_the_name_mapping_to_files_without_field_ids(
        reader: str, readers: Readers, name_mapped: tuple[str, pa.Table]) -> None:
    metadata, expected = name_mapped
    assert expected.num_rows == 20
    assert_same_rows(ICEBERG_READERS[reader](readers, metadata, None), expected)


# --- a Delta table written by deltalake ------------------------------------------------------------------

@pytest.fixture(scope="module")
def delta_history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int | None, pa.Table]]:
    from deltalake import DeltaTable, write_deltalake

    path = tmp_path_factory.mktemp("delta") / "events"
    write_deltalake(path, rows(range(0, 40), "a"), partition_by=["part"])
    write_deltalake(path, pa.concat_tables([rows(range(40, 60), "a"), rows(range(60, 90), "b")]),
                    mode="append")
    DeltaTable(path).delete("(id >= 10 AND id < 20) OR id = 65")
    write_deltalake(path, rows(range(90, 100), "c"), mode="append")
    versions = range(DeltaTable(path).version() + 1)
    expected: dict[int | None, pa.Table] = {version: deltalake_query(path, version) for version in versions}
    expected[None] = deltalake_query(path)
    assert expected[None].num_rows == 100 - 11
    return path, expected


DeltaReader = Callable[[Readers, Path, "int | None"], pa.Table]
DELTA_READERS: dict[str, DeltaReader] = {
    "deltalake": lambda readers, path, version: deltalake_query(path, version),
    "polars": lambda readers, path, version: polars_delta(path, version),
    "spark": lambda readers, path, version: readers.spark_delta(path, version),
}


@pytest.mark.parametrize("reader", DELTA_READERS)
def test_delta_readers_return_deltalakes_rows_at_every_version(
        reader: str, readers: Readers, delta_history: tuple[Path, dict[int | None, pa.Table]]) -> None:
    path, expected = delta_history
    for version, rows_then in expected.items():
        assert_same_rows(DELTA_READERS[reader](readers, path, version), rows_then)


def test_duckdb_reads_the_latest_delta_version(
        readers: Readers, delta_history: tuple[Path, dict[int | None, pa.Table]]) -> None:
    """DuckDB's delta_scan has no time travel: the latest version only."""
    path, expected = delta_history
    assert_same_rows(readers.duckdb_delta(path), expected[None])


# --- the REST catalog server ------------------------------------------------------------------------------

def test_spark_and_pyiceberg_read_a_table_registered_in_the_rest_catalog(
        readers: Readers, rest_catalog: RestCatalogServer, iceberg_history: IcebergHistory) -> None:
    catalog = rest_catalog.catalog()
    catalog.create_namespace("registered")
    catalog.register_table("registered.events", iceberg_history.metadata)
    table = rest_catalog.spark_table("registered.events")
    first = next(snapshot for snapshot in iceberg_history.expected if snapshot is not None)
    assert_same_rows(readers.spark_iceberg(table), iceberg_history.expected[None])
    assert_same_rows(readers.spark_iceberg(table, first), iceberg_history.expected[first])
    assert_same_rows(pyiceberg_scan((catalog, "registered.events")), iceberg_history.expected[None])


# --- position deletes and deletion vectors, written by Spark ----------------------------------------------

@dataclass(frozen=True)
class SparkDeletes:
    """Tables Spark wrote with row-level deletes (merge-on-read), and what Spark reads back."""

    iceberg: dict[int, str]  # format version -> current metadata file
    delta: Path
    expected: pa.Table


def _current_metadata(table_dir: Path) -> str:
    version = (table_dir / "metadata" / "version-hint.text").read_text().strip()
    return str(table_dir / "metadata" / f"v{version}.metadata.json")


@pytest.fixture(scope="module")
def spark_deletes(readers: Readers, tmp_path_factory: pytest.TempPathFactory) -> SparkDeletes:
    from pyiceberg.table import StaticTable

    root = tmp_path_factory.mktemp("spark-deletes")
    values = "(1, 'a', 'x'), (2, 'b', 'x'), (3, 'c', 'y'), (4, 'd', 'y'), (5, 'e', 'y'), (6, 'f', 'z')"
    iceberg = {}
    for version in (2, 3):
        name = f"deletes_v{version}"
        readers.spark_sql(
            f"SET spark.sql.catalog.{name} = org.apache.iceberg.spark.SparkCatalog",
            f"SET spark.sql.catalog.{name}.type = hadoop",
            f"SET spark.sql.catalog.{name}.warehouse = {(root / name).as_uri()}",
            f"CREATE NAMESPACE {name}.db",
            f"CREATE TABLE {name}.db.t (id BIGINT, name STRING, part STRING) USING iceberg "
            f"PARTITIONED BY (part) TBLPROPERTIES ('format-version' = '{version}', "
            "'write.delete.mode' = 'merge-on-read', "
            "'write.update.mode' = 'merge-on-read')",
            f"INSERT INTO {name}.db.t VALUES {values}",
            f"DELETE FROM {name}.db.t WHERE id IN (2, 5)",
            f"UPDATE {name}.db.t SET name = 'C' WHERE id = 3")
        iceberg[version] = _current_metadata(root / name / "db" / "t")
        snapshot = StaticTable.from_metadata(iceberg[version]).current_snapshot()
        assert snapshot is not None and snapshot.summary is not None
        assert snapshot.summary["total-position-deletes"] == "3", snapshot.summary  # 2 deleted, 1 updated
    assert list((root / "deletes_v3").rglob("*.puffin")), "Iceberg v3 writes deletion vectors (Puffin)"
    delta = root / "delta"
    readers.spark_sql(
        f"CREATE TABLE delta.`{delta}` (id BIGINT, name STRING, part STRING) USING delta "
        "PARTITIONED BY (part) TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')",
        f"INSERT INTO delta.`{delta}` VALUES {values}",
        f"DELETE FROM delta.`{delta}` WHERE id IN (2, 5)",
        f"UPDATE delta.`{delta}` SET name = 'C' WHERE id = 3")
    actions = [json.loads(line) for log in sorted((delta / "_delta_log").glob("*.json"))
               for line in log.read_text().splitlines()]
    assert any(action.get("add", {}).get("deletionVector") for action in actions), "no deletion vector"
    expected = pa.table({"id": pa.array([1, 3, 4, 6], pa.int64()), "name": ["a", "C", "d", "f"],
                         "part": ["x", "y", "y", "z"]})
    for version in (2, 3):
        assert_same_rows(readers.spark_iceberg(iceberg[version]), expected)
    assert_same_rows(readers.spark_delta(delta), expected)
    return SparkDeletes(iceberg, delta, expected)


DAFT_V3 = pytest.mark.xfail(raises=ReaderError, strict=True,
                            reason="daft 0.7.26 opens Iceberg v3 deletion vectors (Puffin) as Parquet")


@pytest.mark.parametrize(("reader", "version"), [
    ("pyiceberg", 2), ("duckdb", 2), ("daft", 2),
    ("pyiceberg", 3), ("duckdb", 3), pytest.param("daft", 3, marks=DAFT_V3),
])
def test_iceberg_readers_apply_position_deletes_and_v3_deletion_vectors(
        reader: str, version: int, readers: Readers, spark_deletes: SparkDeletes) -> None:
    actual = ICEBERG_READERS[reader](readers, spark_deletes.iceberg[version], None)
    assert_same_rows(actual, spark_deletes.expected)


@pytest.mark.parametrize("reader", ["deltalake", "polars", "duckdb"])
def test_delta_readers_apply_deletion_vectors(reader: str, readers: Readers,
                                              spark_deletes: SparkDeletes) -> None:
    path = spark_deletes.delta
    actual = readers.duckdb_delta(path) if reader == "duckdb" else DELTA_READERS[reader](readers, path, None)
    assert_same_rows(actual, spark_deletes.expected)
