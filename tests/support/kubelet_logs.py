"""The process kubelet's log endpoint: what a real API server asks for `pods/NAME/log` (`kubectl logs`).

Owns one HTTPS server on 127.0.0.1 (a free port, announced in the Node's daemonEndpoints) answering the
kubelet API's `GET /containerLogs/<namespace>/<pod>/<container>` from the pod's process log, with
`tailLines`, and `follow` (streams until the pod's process ends). TLS with a certificate from the cluster's
CA; callers must present a client certificate from it (the API server's --kubelet-client-certificate).
"""

from __future__ import annotations

import http.server
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from tests.support.pod_status import POD_IP


class PodLogServer:
    """Serves `log_path(namespace, pod)` files; `running(namespace, pod)` says whether to keep following."""

    def __init__(self, tls: ssl.SSLContext, log_path: Callable[[str, str], Path],
                 running: Callable[[str, str], bool]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                parts = url.path.strip("/").split("/")
                if len(parts) != 4 or parts[0] != "containerLogs":
                    self.send_error(404, "the process kubelet serves /containerLogs/NAMESPACE/POD/CONTAINER")
                    return
                namespace, pod = parts[1], parts[2]
                query = urllib.parse.parse_qs(url.query)
                path = log_path(namespace, pod)
                data = path.read_bytes() if path.exists() else b""
                if "tailLines" in query:
                    lines = data.splitlines(keepends=True)
                    data = b"".join(lines[len(lines) - int(query["tailLines"][0]):]) if lines else b""
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(data)
                if query.get("follow", ["false"])[0] != "true":
                    return
                offset = path.stat().st_size if path.exists() else 0
                while running(namespace, pod):  # then once more: what the process wrote last
                    time.sleep(0.2)
                    offset = self._send_from(path, offset)
                self._send_from(path, offset)

            def _send_from(self, path: Path, offset: int) -> int:
                with path.open("rb") as log:
                    log.seek(offset)
                    chunk = log.read()
                if chunk:
                    self.wfile.write(chunk)
                    self.wfile.flush()
                return offset + len(chunk)

            def log_message(self, format: str, *args: object) -> None:
                pass  # no access log on the test's stderr

        self.server = http.server.ThreadingHTTPServer((POD_IP, 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port: int = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, name="kubelet-logs", daemon=True)

    def start(self) -> PodLogServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(10)
