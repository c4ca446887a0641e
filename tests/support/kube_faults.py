"""A fault-injecting HTTPS proxy in front of a real API server: the failures a healthy server never gives.

Owns one listening socket on 127.0.0.1 (TLS, a serving certificate from the cluster's CA) that passes
each request on to the control plane (kube_server.py) as the admin (its client certificate; a client's
own credentials are dropped) and streams the answer back, watches included, unless `faults` names the
request's verb and resource or subresource: then it answers with that Kubernetes Status itself (e.g.
POST pods -> 503, the API server briefly unable to create pods; PUT lakewriters/status -> 409) and the
server never sees the request. `cut()` is a
network partition until `heal()`: every open connection (watches included) is cut and new ones are
closed unanswered, while other clients still reach the server directly. One request per
connection (`Connection: close` both ways), so every request is looked at; the clients of the tests
(kopf's aiohttp, the `kubernetes` client) reconnect as they would after a server closed a connection.
Must not change what it passes on.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import ssl
import threading
from pathlib import Path

import yaml

from tests.support.kube_server import HOST, ControlPlane
from tests.support.zookeeper import free_port

# /api/v1/namespaces/NS/PLURAL[/NAME[/SUB]] or /apis/GROUP/VERSION/...; the plural and the subresource
_PATH = re.compile(r"^/apis?/(?:[^/]+/)?v[^/]+(?:/namespaces/[^/]+)?/(?P<plural>[^/?]+)"
                   r"(?:/[^/?]+(?:/(?P<sub>[^/?]+))?)?")
_HEAD_LIMIT = 1 << 16
Fault = tuple[int, str, str]   # HTTP code, Status reason, message


class FaultProxy:
    """Passes requests to `server`; `faults[(method, resource)]` answers them instead (resource: a plural,
    or `plural/subresource` such as `lakewriters/status`)."""

    def __init__(self, server: ControlPlane) -> None:
        self.server = server
        self.port = free_port()
        self.url = f"https://{HOST}:{self.port}"
        self.faults: dict[tuple[str, str], Fault] = {}
        self.refused = 0   # requests answered with a fault
        self.partitioned = False
        serving = server.ca.issue(f"fault-proxy-{self.port}", "fault-proxy", hosts=(HOST,), server=True)
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._tls.load_cert_chain(str(serving.cert), str(serving.key))
        self._upstream_tls = server.ssl_context()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)

    def start(self) -> FaultProxy:
        self._listener = socket.create_server((HOST, self.port))
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        self._shut_all()
        self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def cut(self) -> None:
        """A partition: the open connections end, new ones are closed unanswered (until heal())."""
        self.partitioned = True
        self._shut_all()

    def heal(self) -> None:
        self.partitioned = False

    def _shut_all(self) -> None:
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def write_kubeconfig(self, path: Path, namespace: str) -> Path:
        """A kubeconfig for the proxy (the cluster's CA; a placeholder token: the proxy is the admin)."""
        config = yaml.safe_load(self.server.write_kubeconfig(path, namespace=namespace).read_text())
        config["clusters"][0]["cluster"]["server"] = self.url
        config["users"][0]["user"] = {"token": "via-fault-proxy"}
        path.write_text(yaml.safe_dump(config))
        return path

    # ------------------------------------------------------------ connections

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return   # stopped
            threading.Thread(target=self._serve, args=(raw,), name="fault-proxy-conn", daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        client: socket.socket = raw
        upstream: socket.socket | None = None
        try:
            if self.partitioned:
                return
            client = self._tls.wrap_socket(raw, server_side=True)   # raw is detached from here on
            self._track(client)
            head, body = _read_request(client)
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            method, target, _ = request_line.split(" ", 2)
            fault = self._fault(method, target)
            if fault is not None:
                client.sendall(_status_response(*fault))
                return
            kept = [h for h in header_lines
                    if h and not h.lower().startswith(("connection:", "authorization:"))]
            upstream = self._upstream_tls.wrap_socket(socket.create_connection((HOST, self.server.port)),
                                                      server_hostname=HOST)
            self._track(upstream)
            upstream.sendall("\r\n".join([request_line, *kept, "Connection: close", "", ""]).encode("latin-1")
                             + body)
            while chunk := upstream.recv(65536):
                client.sendall(chunk)
        except (OSError, ValueError):
            pass   # a client or server that went away, a stopped proxy: the connection ends
        finally:
            for sock in (upstream, client):
                if sock is not None:
                    self._untrack(sock)
                    with contextlib.suppress(OSError):
                        sock.close()

    def _fault(self, method: str, target: str) -> Fault | None:
        match = _PATH.match(target)
        if match is None:
            return None
        resource = match["plural"] if match["sub"] is None else f"{match['plural']}/{match['sub']}"
        fault = self.faults.get((method, resource))
        if fault is not None:
            with self._lock:
                self.refused += 1
        return fault

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)


def _read_request(sock: ssl.SSLSocket) -> tuple[bytes, bytes]:
    """One request's head (without the blank line) and its body (Content-Length bytes)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk or len(data) > _HEAD_LIMIT:
            raise ValueError("no complete request head")
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")[1:]
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ValueError("the request body ended early")
        body += chunk
    return head, body


def _status_response(code: int, reason: str, message: str) -> bytes:
    status = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": message, "reason": reason, "code": code}).encode()
    return (f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(status)}\r\nConnection: close\r\n\r\n").encode() + status
