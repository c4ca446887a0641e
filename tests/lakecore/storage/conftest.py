import uuid

import pytest

from lakecore.storage import open_storage


@pytest.fixture(params=["local", "file-uri", "memory", pytest.param("s3", marks=pytest.mark.s3)])
def storage_uri(request, tmp_path):
    """(uri, storage options) of an empty table location on every backend."""
    if request.param == "local":
        return str(tmp_path / "t"), None
    if request.param == "file-uri":
        return f"file://{tmp_path}/t", None
    if request.param == "memory":
        return f"memory://weir-tests/{uuid.uuid4().hex}", None
    server = request.getfixturevalue("s3_server")
    bucket = f"weir-{uuid.uuid4().hex[:12]}"
    server.client().create_bucket(Bucket=bucket)
    return f"s3://{bucket}/tables/t", server.s3fs_options()


@pytest.fixture
def storage(storage_uri):
    uri, options = storage_uri
    return open_storage(uri, options)
