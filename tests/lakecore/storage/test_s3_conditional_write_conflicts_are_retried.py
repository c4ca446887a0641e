"""S3 answers a conditional PUT that overlaps another on the same key with 409 ConditionalRequestConflict.
A create-if-absent retries it: it then creates the file, or finds it created (AlreadyExists); it never
leaks a raw OSError to the lock or the timeline."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError
from s3fs.errors import translate_boto_error

from lakecore.errors import AlreadyExists, StorageError
from lakecore.storage import open_storage
from lakecore.storage.fsspec_store import CONFLICT_RETRIES, create_failure
from tests.support.s3 import S3Server
from tests.support.s3_faults import ConflictingS3Proxy

pytestmark = pytest.mark.s3


def s3_error(status: int, code: str) -> ClientError:
    """The exception botocore raises for an S3 error response (as parsed from the XML body)."""
    return ClientError({"Error": {"Code": code, "Message": "..."},
                        "ResponseMetadata": {"HTTPStatusCode": status}}, "PutObject")


def test_the_409_is_told_apart_from_the_412_and_other_failures() -> None:
    assert create_failure(translate_boto_error(s3_error(409, "ConditionalRequestConflict"))) == "conflict"
    assert create_failure(translate_boto_error(s3_error(412, "PreconditionFailed"))) == "exists"
    assert create_failure(translate_boto_error(s3_error(403, "AccessDenied"))) == "other"
    assert create_failure(FileExistsError("x")) == "exists"


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[ConflictingS3Proxy]:
    proxy = ConflictingS3Proxy(s3_server)
    yield proxy
    proxy.close()


def _storage(s3_server: S3Server, proxy: ConflictingS3Proxy):  # type: ignore[no-untyped-def]
    bucket = f"weir-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=bucket)
    return bucket, open_storage(f"s3://{bucket}/t", proxy.s3fs_options())


def test_a_conflicting_conditional_put_is_retried_until_it_creates_the_file(
    s3_server: S3Server, proxy: ConflictingS3Proxy,
) -> None:
    _, storage = _storage(s3_server, proxy)
    proxy.conflicts = 2
    storage.write_if_absent(".weir/locks/00000000000000000001", b"ours")
    assert proxy.answered_409 == 2
    assert storage.read(".weir/locks/00000000000000000001") == b"ours"


def test_when_the_racing_put_wins_the_retry_reports_the_file_exists(
    s3_server: S3Server, proxy: ConflictingS3Proxy,
) -> None:
    bucket, storage = _storage(s3_server, proxy)
    proxy.conflicts = 1
    proxy.on_conflict = lambda _: s3_server.client().put_object(
        Bucket=bucket, Key="t/.weir/timeline/x.commit", Body=b"theirs", IfNoneMatch="*")
    with pytest.raises(AlreadyExists):
        storage.write_if_absent(".weir/timeline/x.commit", b"ours")
    assert storage.read(".weir/timeline/x.commit") == b"theirs"


def test_conflicts_that_do_not_stop_end_in_a_retryable_storage_error(
    s3_server: S3Server, proxy: ConflictingS3Proxy,
) -> None:
    _, storage = _storage(s3_server, proxy)
    proxy.conflicts = CONFLICT_RETRIES + 1
    with pytest.raises(StorageError, match=r"ConditionalRequestConflict.*retry") as raised:
        storage.write_if_absent("f", b"ours")
    assert raised.value.retryable
    assert not storage.exists("f")
