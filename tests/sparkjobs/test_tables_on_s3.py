"""Spark jobs on a table in S3 (moto): the table's storage, credentials included, travels to the
tasks inside the pickled write context; the writes, a compaction and a read through the weir data
source all reach the bucket through lakecore's fsspec storage (Spark itself has no s3a here)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from lakecore import Table

pytestmark = [pytest.mark.spark, pytest.mark.s3]

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def test_write_compact_and_read_a_table_in_s3(spark, s3_server):
    from sparkjobs.services import compact
    from sparkjobs.write import write_dataframe

    bucket = f"weir-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=bucket)
    options = s3_server.s3fs_options()
    uri = f"s3://{bucket}/tables/t"
    t = Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                     storage_options=options)
    for ts in (1, 2):
        batch = pa.table({"id": list(range(ts * 10, ts * 10 + 30)), "ts": [ts] * 30, "v": [str(ts)] * 30},
                         schema=SCHEMA)
        write_dataframe(spark.createDataFrame(batch), t)
    out = compact(spark, t)
    assert out.instant is not None and out.operations == 2
    reader = spark.read.format("weir")
    for key, value in options.items():
        if isinstance(value, str):
            reader = reader.option(f"storage.{key}", value)
    got = {r["id"]: r["ts"] for r in reader.load(uri).collect()}
    assert got == {i: 1 for i in range(10, 20)} | {i: 2 for i in range(20, 50)}
    assert got == {r["id"]: r["ts"] for r in Table.open(uri, storage_options=options).read().to_pylist()}
