"""A table on S3 (the local moto server) is published beside itself and read there: pyiceberg through
its S3 file IO, polars through deltalake's log and its own object store; both see exactly
Table.read(). (deltalake's own DataFusion reader cannot fetch a Parquet footer from moto's server
here: it retries for 180 s, with or without published metadata; it reads these tables on local disk.)"""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from lakecore import Table
from tests.lakecore.publish import readers
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = pytest.mark.s3

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])


def test_publish_on_s3_and_read_it_back(s3_server):
    bucket = f"pub-{uuid.uuid4().hex[:8]}"
    s3_server.client().create_bucket(Bucket=bucket)
    uri = f"s3://{bucket}/lake/t"
    t = Table.create(uri, schema=SCHEMA, record_key="id", partition_fields=["dt"], buckets=2,
                     storage_options=s3_server.s3fs_options())
    t.upsert(pa.table({"id": list(range(12)), "dt": ["a", "b"] * 6, "v": [f"v{i}" for i in range(12)]},
                      schema=SCHEMA))
    t.delete(pa.table({"id": [1, 2], "dt": ["b", "a"]}))
    t.upsert(pa.table({"id": [3], "dt": ["b"], "v": ["new"]}, schema=SCHEMA))
    iceberg = t.publish("iceberg")
    t.publish("delta")
    want = t.read()

    from pyiceberg.table import StaticTable

    io = {"s3.endpoint": s3_server.endpoint_url, "s3.access-key-id": ACCESS_KEY,
          "s3.secret-access-key": SECRET_KEY, "s3.region": REGION}
    got = readers.normalized(StaticTable.from_metadata(iceberg.location, properties=io).scan().to_arrow())
    readers.assert_same(got, readers.expected(want, "iceberg"), ["id"], reader="pyiceberg on S3")
    options = {"AWS_ENDPOINT_URL": s3_server.endpoint_url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
               "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION, "AWS_ALLOW_HTTP": "true"}
    import polars as pl

    got = readers.normalized(pl.read_delta(uri, storage_options=options).to_arrow())
    readers.assert_same(got, readers.expected(want, "delta"), ["id"], reader="polars on S3")
