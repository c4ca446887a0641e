"""A local S3 endpoint (moto's server) on 127.0.0.1 for tests.

moto honours conditional writes (`If-None-Match: *`, `If-Match`), which lakecore's create-if-absent
state transitions rely on. The server runs in a thread of the test process; other processes reach it
over HTTP like any S3 endpoint.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from moto.server import ThreadedMotoServer

HOST = "127.0.0.1"
REGION = "us-east-1"
# moto accepts any credentials; fixed ones keep clients from searching the environment for real ones.
ACCESS_KEY = "testing"
SECRET_KEY = "testing"


class S3Server:
    """moto's S3 server on a free port; `endpoint_url` and credentials for boto3, s3fs and pyarrow."""

    def __init__(self) -> None:
        self._server: ThreadedMotoServer | None = None
        self.endpoint_url = ""

    def start(self) -> S3Server:
        from moto.server import ThreadedMotoServer  # half a second of imports: only when S3 is used

        # werkzeug otherwise logs every request to stderr.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._server = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)  # port 0: no race
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def client_kwargs(self) -> dict[str, str]:
        """Keyword arguments for `boto3.client("s3", **kwargs)`."""
        return {
            "endpoint_url": self.endpoint_url,
            "region_name": REGION,
            "aws_access_key_id": ACCESS_KEY,
            "aws_secret_access_key": SECRET_KEY,
        }

    def s3fs_options(self) -> dict[str, Any]:
        """fsspec `storage_options` for `s3://` URLs."""
        return {
            "key": ACCESS_KEY,
            "secret": SECRET_KEY,
            "endpoint_url": self.endpoint_url,
            "client_kwargs": {"region_name": REGION},
        }

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", **self.client_kwargs())
