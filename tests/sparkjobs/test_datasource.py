"""spark.read.format("weir"): Spark reads what lakecore reads — latest, as of an instant, base files
only — one partition per file slice, partition filters pruning slices."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore import FileOptions, Table, WriterOptions

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def data(ids, ts):
    ids = list(ids)
    return pa.table({"id": ids, "day": [f"d{i % 3}" for i in ids], "ts": [ts] * len(ids),
                     "v": [f"{i}@{ts}" for i in ids]}, schema=SCHEMA)


def rows(table) -> list[tuple]:
    return sorted(tuple(r) for r in table)


def lakecore_rows(t: Table, **kw) -> list[tuple]:
    return sorted(tuple(r.values()) for r in t.read(columns=SCHEMA.names, **kw).to_pylist())


@pytest.fixture
def table(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", partition_fields=["day"],
                     ordering_field="ts", buckets=2)
    first = t.upsert(data(range(60), 1)).instant
    t.upsert(data(range(30, 90), 2))
    t.delete(pa.table({"id": [1, 4], "day": ["d1", "d1"], "ts": [5, 5]}))
    return t, first


def test_spark_reads_the_latest_state(spark, table):
    t, _ = table
    df = spark.read.format("weir").load(t.uri)
    assert df.columns == SCHEMA.names
    assert df.rdd.getNumPartitions() == 6  # 3 partitions x 2 buckets: one Spark partition per slice
    assert rows(df.collect()) == lakecore_rows(t)


def test_time_travel_and_read_optimized(spark, table):
    t, first = table
    as_of = spark.read.format("weir").option("asOf", first.requested_time).load(t.uri)
    assert rows(as_of.collect()) == lakecore_rows(t, as_of=first.requested_time)
    base_only = spark.read.format("weir").option("queryType", "read_optimized").load(t.uri)
    assert rows(base_only.collect()) == lakecore_rows(t, query="read_optimized")


def test_partition_filters_prune_slices_and_other_filters_still_apply(spark, table):
    t, _ = table
    df = spark.read.format("weir").load(t.uri)
    d2 = df.where((df.day == "d2") & (df.ts == 2))
    assert d2.rdd.getNumPartitions() == 2  # only partition d2's two slices are read
    got = d2.collect()
    assert rows(got) == sorted(r for r in lakecore_rows(t) if r[1] == "d2" and r[2] == 2)
    assert rows(df.where(df.day.isin("d0", "d1")).collect()) == sorted(
        r for r in lakecore_rows(t) if r[1] in ("d0", "d1"))


def test_an_empty_table_and_a_missing_one(spark, tmp_path):
    empty = Table.create(str(tmp_path / "e"), schema=SCHEMA, record_key="id", ordering_field="ts")
    assert spark.read.format("weir").load(empty.uri).count() == 0
    with pytest.raises(Exception, match=r"TableNotFound|no table"):
        spark.read.format("weir").load(str(tmp_path / "missing")).collect()


def test_files_older_than_an_added_column_read_it_as_null(spark, tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", partition_fields=["day"],
                     ordering_field="ts", buckets=2, table_type="copy_on_write",
                     options=WriterOptions(files=FileOptions(evolve_schema=True)))
    first = t.upsert(data(range(6), 1)).instant
    t.upsert(data([0], 2).append_column("score", pa.array([0.5])))   # one slice gains the column
    df = spark.read.format("weir").load(t.uri)
    assert df.columns == [*SCHEMA.names, "score"]
    assert sorted((r.id, r.score) for r in df.collect()) == [(0, 0.5), *((i, None) for i in range(1, 6))]
    for option, value in (("asOf", first.requested_time), ("queryType", "read_optimized")):
        read = spark.read.format("weir").option(option, value).load(t.uri)
        expected = t.read(**({"as_of": value} if option == "asOf" else {"query": value}))
        assert sorted((r.id, r.score) for r in read.collect()) == \
            sorted((r["id"], r["score"]) for r in expected.to_pylist())
