"""The test S3 endpoint creates buckets and honours create-if-absent writes (`If-None-Match: *`)."""

from __future__ import annotations

import uuid

import pytest
from botocore.exceptions import ClientError

from tests.support.s3 import S3Server

pytestmark = pytest.mark.s3


def test_conditional_put_succeeds_once_then_fails(s3_server: S3Server) -> None:
    client = s3_server.client()
    bucket = f"support-{uuid.uuid4().hex[:12]}"
    client.create_bucket(Bucket=bucket)

    client.put_object(Bucket=bucket, Key="instant", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as raised:
        client.put_object(Bucket=bucket, Key="instant", Body=b"second", IfNoneMatch="*")

    assert raised.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=bucket, Key="instant")["Body"].read() == b"first"
