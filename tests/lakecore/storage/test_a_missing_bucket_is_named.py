"""A table located in a bucket that does not exist: creating it says the bucket is missing and what to do
(before: S3's "The specified bucket does not exist; check the disk or the connection to the storage"),
and nothing is written. On the real S3 emulator (moto)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.errors import StorageError, TableNotFound

pytestmark = [pytest.mark.s3]


def test_creating_a_table_in_a_missing_bucket_says_so(s3_server):
    uri = f"s3://missing-{uuid.uuid4().hex[:8]}/orders"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    with pytest.raises(StorageError, match=r"its bucket does not exist; create the bucket, or fix the "
                                           r"location") as caught:
        Table.create(uri, schema=schema, record_key="id", storage_options=s3_server.s3fs_options())
    assert uri in str(caught.value) and "check the disk" not in str(caught.value)
    with pytest.raises(TableNotFound):
        Table.open(uri, storage_options=s3_server.s3fs_options())
