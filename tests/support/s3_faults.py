"""A fault-injecting HTTP proxy in front of the test S3 endpoint: answers chosen conditional PUTs with
S3's real 409 ConditionalRequestConflict response, forwards everything else unchanged.

moto applies conditional writes one at a time, so it never answers 409 itself; real S3 does when two
conditional writes on one key overlap. Clients (boto3, s3fs, pyarrow) reach the proxy like any endpoint.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

from tests.support.s3 import S3Server

CONFLICT_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ConditionalRequestConflict</Code>'
                 b"<Message>A conflicting conditional operation is currently in progress against this "
                 b"resource. Please try again.</Message><RequestId>WEIRTEST</RequestId></Error>")
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "content-length"}


class ConflictingS3Proxy:
    """`conflicts` conditional PUTs (If-None-Match: *) get a 409; before each, `on_conflict(key)` runs
    (e.g. lets the racing writer's PUT land). Use `s3fs_options()` like S3Server's."""

    def __init__(self, upstream: S3Server) -> None:
        self.upstream = upstream
        self.conflicts = 0
        self.answered_409 = 0
        self.on_conflict: Callable[[str], None] | None = None
        self._guard = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # tests read results, not access logs

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "PUT" and self.headers.get("If-None-Match") == "*" and proxy._take():
                    if proxy.on_conflict is not None:
                        proxy.on_conflict(self.path)
                    self.send_response(409)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(CONFLICT_BODY)))
                    self.end_headers()
                    self.wfile.write(CONFLICT_BODY)
                    return
                target = urlparse(proxy.upstream.endpoint_url)
                conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=30)
                try:
                    conn.request(self.command, self.path, body=body or None,
                                 headers={k: v for k, v in self.headers.items() if k.lower() not in _HOP})
                    answer = conn.getresponse()
                    data = answer.read()
                    self.send_response(answer.status, answer.reason)
                    for k, v in answer.getheaders():
                        if k.lower() not in _HOP:
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="s3-faults", daemon=True)
        self._thread.start()
        self.endpoint_url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def _take(self) -> bool:
        with self._guard:
            if self.conflicts <= 0:
                return False
            self.conflicts -= 1
            self.answered_409 += 1
            return True

    def s3fs_options(self) -> dict[str, Any]:
        return {**self.upstream.s3fs_options(), "endpoint_url": self.endpoint_url}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
