"""The Spark writer routes rows by the table's own bucket hash: a format-2 table's buckets come from
Spark's hash() in the JVM (keys cast to their stored types first), a format-1 table's from its Python
hash through an Arrow UDF. Either way every key lands in the file group lakecore's own writer puts it
in, and each file group is written whole by one task (one file per file group and instant)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.layout import parse_data_file_name
from tests.support.formats import as_format_1

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def data(ids, ts, days=("d1", "d2", "d3")):
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [days[i % len(days)] for i in ids],
                     "ts": pa.array([ts] * len(ids), pa.int64()), "v": [f"{i}@{ts}" for i in ids]},
                    schema=SCHEMA)


def placement(t: Table, key: list[str]) -> list[tuple]:
    """(key..., partition/file id) of every row, sorted: where each key is stored."""
    read = Table.open(t.uri).read(with_meta=True)
    out = []
    for row in read.to_pylist():
        name = parse_data_file_name(row["_weir_file_name"].rsplit("/", 1)[-1])
        assert name is not None
        out.append((*[row[k] for k in key], row["_weir_partition_path"], name.file_id,
                    *[row[c] for c in read.column_names if not c.startswith("_weir_")]))
    return sorted(out, key=repr)


def one_file_per_group(t: Table, instant) -> bool:
    stats = Table.open(t.uri).commit_metadata(instant).write_stats
    return max(Counter((s.partition, s.file_id) for s in stats).values()) == 1


@pytest.mark.parametrize("fmt", [1, 2])
def test_spark_puts_every_key_where_lakecore_does(spark, tmp_path, fmt):
    from sparkjobs.write import write_dataframe

    def make(name):
        t = Table.create(str(tmp_path / name), schema=SCHEMA, record_key="id", partition_fields=["day"],
                         ordering_field="ts", buckets=4)
        return as_format_1(t) if fmt == 1 else t
    by_spark, by_lakecore = make("spark"), make("lakecore")
    assert by_spark.config.bucket_hash == ("weir_v1" if fmt == 1 else "spark_murmur3")
    for op, batch in (("upsert", data(range(400), 1)), ("upsert", data(range(300, 700), 2)),
                      ("insert_overwrite", data([0, 1, 3, 5], 3, days=("d1", "d2")))):
        result = write_dataframe(spark.createDataFrame(batch), by_spark, op, parallelism=3)  # type: ignore[arg-type]
        by_lakecore.write(batch, op)  # type: ignore[arg-type]
        assert one_file_per_group(by_spark, result.instant), op
        assert placement(by_spark, ["id"]) == placement(by_lakecore, ["id"]), op
    assert Table.open(by_spark.uri).config.format_version == fmt


def test_keys_are_hashed_as_stored_not_as_spark_holds_them(spark, tmp_path):
    # Spark holds longs and microsecond timestamps; the table stores int32 and millisecond timestamps
    # (and partitions by an unsigned byte, which Spark has no type for: Spark holds shorts)
    from sparkjobs.write import write_dataframe

    schema = pa.schema([("k", pa.int32()), ("at", pa.timestamp("ms", "UTC")), ("p", pa.uint8()),
                        ("v", pa.string())])
    start = datetime(2024, 5, 1, tzinfo=UTC)
    n = 300
    rows = pa.table({"k": pa.array([i % 50 - 25 for i in range(n)], pa.int64()),
                     "at": pa.array([start + timedelta(seconds=37 * i) for i in range(n)],
                                    pa.timestamp("us", "UTC")),
                     "p": pa.array([i % 3 for i in range(n)], pa.int16()),
                     "v": [str(i) for i in range(n)]})
    by_spark, by_lakecore = (Table.create(str(tmp_path / name), schema=schema, record_key=["k", "at"],
                                          partition_fields=["p"], buckets=5)
                             for name in ("spark", "lakecore"))
    assert by_spark.config.bucket_hash == "spark_murmur3"
    result = write_dataframe(spark.createDataFrame(rows), by_spark, "upsert", parallelism=2)
    by_lakecore.upsert(rows)
    assert one_file_per_group(by_spark, result.instant)
    assert placement(by_spark, ["k", "at"]) == placement(by_lakecore, ["k", "at"])
    assert len(placement(by_spark, ["k", "at"])) == n
