"""Engines outside the project's venv read a published merge-on-read table exactly as `Table.read()`
returns it (row for row, types as the type map says): DuckDB with its iceberg and delta extensions,
daft, and Spark 4.1 with Apache Iceberg's runtime and Delta's jars. The table holds upserts that
supersede rows in base and log files, event-time losers and deletes (rows hidden by position-delete
files and deletion vectors), partitioned, in every type both targets hold; then again after a
compaction and more writes left in log files; an earlier published snapshot or version reads as
`Table.read(as_of=<its instant>)` (DuckDB has no Delta time travel). The same for Iceberg v3 (deletion
vectors) with DuckDB and Spark; daft does not read v3 deletion vectors (tests/support/test_readers.py).
Each engine runs in its own long-lived process (`make readers`), one Spark JVM for the session."""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.publish import PublishResult
from tests.lakecore.publish import readers as published
from tests.support.readers import Readers

pytestmark = [pytest.mark.readers, pytest.mark.slow]

SCHEMA = pa.schema([
    ("id", pa.int64()), ("dt", pa.string()), ("ts", pa.int64()), ("name", pa.string()),
    ("score", pa.float64()), ("small", pa.int8()), ("flag", pa.bool_()), ("day", pa.date32()),
    ("at", pa.timestamp("us", tz="UTC")), ("price", pa.decimal128(10, 2)), ("payload", pa.binary()),
])


def rows(ids: list[int], ts: int, tag: str) -> pa.Table:
    at = dt.datetime(2026, 11, 26, 8, 0, tzinfo=dt.UTC)
    return pa.table({
        "id": ids, "dt": [f"d{i % 3}" for i in ids], "ts": [ts] * len(ids),
        "name": [None if i % 7 == 0 else f"{tag}{i}" for i in ids], "score": [i / 3 for i in ids],
        "small": [i % 100 for i in ids], "flag": [i % 2 == 0 for i in ids],
        "day": [dt.date(2026, 11, 1) + dt.timedelta(days=i % 30) for i in ids],
        "at": [at + dt.timedelta(seconds=i + ts) for i in ids],
        "price": [decimal.Decimal(i * 25 + ts) / 100 for i in ids],
        "payload": [f"{tag}{i}".encode() for i in ids],
    }, schema=SCHEMA)


def keys(ids: list[int], ts: int) -> pa.Table:
    return pa.table({"id": ids, "dt": [f"d{i % 3}" for i in ids], "ts": [ts] * len(ids)},
                    schema=pa.schema([SCHEMA.field("id"), SCHEMA.field("dt"), SCHEMA.field("ts")]))


def written(tmp_path_factory: pytest.TempPathFactory) -> Table:
    """A merge-on-read table, event-time ordered, partitioned, with base and log files that hide rows."""
    t = Table.create(str(tmp_path_factory.mktemp("engines") / "t"), schema=SCHEMA, record_key="id",
                     table_type="merge_on_read", partition_fields=["dt"], ordering_field="ts", buckets=2)
    t.bulk_insert(rows(list(range(60)), 10, "a"))
    t.upsert(rows(list(range(0, 80, 3)), 20, "b"))
    t.upsert(rows([1, 2, 4], 5, "late"))        # older events: they lose to what is stored
    t.delete(keys([5, 6, 7, 300], 30))
    return t


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Table:
    return written(tmp_path_factory)


def compacted_table(tmp_path_factory: pytest.TempPathFactory, **published: int) -> Table:
    """The same table compacted (its tombstones stay in the new base files), then written to again;
    `published`: Table.publish's options of an Iceberg publish before the compaction (none: none)."""
    t = written(tmp_path_factory)
    if published:
        t.publish("iceberg", **published)  # the publish after the compaction is then incremental
    assert t.maintenance.compact().instant is not None
    t.upsert(rows([8, 9, 100], 40, "c"))
    t.delete(keys([10, 11], 50))
    return t


@pytest.fixture(scope="module")
def compacted(tmp_path_factory: pytest.TempPathFactory) -> Table:
    return compacted_table(tmp_path_factory)


Read = Callable[[Readers, PublishResult], pa.Table]
ENGINES: dict[str, tuple[str, Read]] = {
    "duckdb iceberg": ("iceberg", lambda r, p: r.duckdb_iceberg(p.location)),
    "duckdb delta": ("delta", lambda r, p: r.duckdb_delta(p.location)),
    "spark iceberg": ("iceberg", lambda r, p: r.spark_iceberg(p.location)),
    "spark delta": ("delta", lambda r, p: r.spark_delta(p.location)),
    "daft iceberg": ("iceberg", lambda r, p: r.daft_iceberg(p.location)),
}


def engines() -> list[str]:
    return list(ENGINES)  # daft applies no name mapping: it reads Weir's files by their field ids


def check(readers: Readers, t: Table, engine: str, step: str, **options: int) -> None:
    target, read = ENGINES[engine]
    result = t.publish(target, **options)
    assert result.snapshot.instant == t.timeline().last_completed().requested_time
    got = published.normalized(read(readers, result))
    published.assert_same(got, published.expected(t.read(), target), ["id"], reader=f"{engine} {step}")


@pytest.mark.parametrize("engine", engines())
def test_engines_read_the_merged_snapshot(readers: Readers, table: Table, engine: str) -> None:
    check(readers, table, engine, "with upserts and deletes in log files")


@pytest.mark.parametrize("engine", engines())
def test_engines_read_it_after_a_compaction_and_more_writes(readers: Readers, compacted: Table,
                                                           engine: str) -> None:
    check(readers, compacted, engine, "after compaction")


TRAVEL: dict[str, tuple[str, Callable[[Readers, PublishResult, int], pa.Table]]] = {
    "duckdb iceberg": ("iceberg", lambda r, p, s: r.duckdb_iceberg(p.location, snapshot=s)),
    "spark iceberg": ("iceberg", lambda r, p, s: r.spark_iceberg(p.location, snapshot=s)),
    "spark delta": ("delta", lambda r, p, s: r.spark_delta(p.location, version=s)),
}


@pytest.mark.parametrize("engine", list(TRAVEL))
def test_engines_travel_to_an_earlier_published_snapshot(readers: Readers,
                                                        tmp_path_factory: pytest.TempPathFactory,
                                                        engine: str) -> None:
    target, read = TRAVEL[engine]
    t = written(tmp_path_factory)
    earlier = t.publish(target).snapshot
    t.upsert(rows([1, 2, 200], 60, "d"))
    t.delete(keys([12, 13], 70))
    latest = t.publish(target)
    assert latest.snapshot.id != earlier.id
    got = published.normalized(read(readers, latest, earlier.id))
    want = published.expected(t.read(as_of=earlier.instant), target)
    published.assert_same(got, want, ["id"], reader=f"{engine} at {earlier.instant}")


V3 = ["duckdb iceberg", "spark iceberg"]  # daft opens v3 deletion vectors as Parquet


@pytest.fixture(scope="module")
def table_v3(tmp_path_factory: pytest.TempPathFactory) -> Table:
    """A table of its own for v3 (a table published as v3 is never published as v2 again)."""
    return written(tmp_path_factory)


@pytest.fixture(scope="module")
def compacted_v3(tmp_path_factory: pytest.TempPathFactory) -> Table:
    return compacted_table(tmp_path_factory, format_version=3)


@pytest.mark.parametrize("engine", V3)
def test_engines_read_the_merged_snapshot_as_iceberg_v3(readers: Readers, table_v3: Table,
                                                        engine: str) -> None:
    check(readers, table_v3, engine, "v3, with upserts and deletes in log files", format_version=3)


@pytest.mark.parametrize("engine", V3)
def test_engines_read_iceberg_v3_after_a_compaction_and_more_writes(readers: Readers, compacted_v3: Table,
                                                                   engine: str) -> None:
    check(readers, compacted_v3, engine, "v3, after compaction", format_version=3)


@pytest.mark.parametrize("engine", V3)
def test_engines_travel_to_an_earlier_iceberg_v3_snapshot(readers: Readers,
                                                          tmp_path_factory: pytest.TempPathFactory,
                                                          engine: str) -> None:
    _, read = TRAVEL[engine]
    t = written(tmp_path_factory)
    earlier = t.publish("iceberg", format_version=3).snapshot
    t.upsert(rows([1, 2, 200], 60, "d"))
    t.delete(keys([12, 13], 70))
    latest = t.publish("iceberg")
    assert latest.format_version == 3 and not latest.full
    got = published.normalized(read(readers, latest, earlier.id))
    want = published.expected(t.read(as_of=earlier.instant), "iceberg")
    published.assert_same(got, want, ["id"], reader=f"{engine} v3 at {earlier.instant}")
