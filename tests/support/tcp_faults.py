"""A TCP proxy in front of one server (ZooKeeper in the tests) that can stall connections: the failure
a healthy server gives only now and then.

Owns one listening socket on 127.0.0.1 that passes each connection on to `upstream` byte for byte
(a thread per direction), unless a stall is due (`stall_next(n)`): then the connection is accepted and
never read or answered, as ZooKeeper 3.8 now and then does with a connection accepted right as it
starts (the request sits unread in the socket until the client gives up). `cut()` ends every
forwarded connection (the server's side as a client sees a restart). Must not change what it passes on.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.support.zookeeper import HOST, free_port


class StallingProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.stalled = 0          # connections accepted and left unanswered
        self.forwarded = 0        # connections passed on
        self._stall = 0
        self._guard = threading.Lock()
        self._open: list[socket.socket] = []
        self._held: list[socket.socket] = []
        self._listener: socket.socket | None = None

    @property
    def connect_string(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self) -> StallingProxy:
        self._listener = socket.create_server((HOST, self.port))
        threading.Thread(target=self._accept, name="stalling-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        self.cut()
        with self._guard:
            held, self._held = self._held, []
        for sock in held:
            sock.close()

    def __enter__(self) -> StallingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stall_next(self, count: int) -> None:
        """The next `count` connections are accepted and never answered."""
        with self._guard:
            self._stall = count

    def cut(self) -> None:
        """End every forwarded connection, both ways."""
        with self._guard:
            open_, self._open = self._open, []
        for sock in open_:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return   # stopped
            with self._guard:
                stall = self._stall > 0
                if stall:
                    self._stall -= 1
                    self.stalled += 1
                    self._held.append(client)
            if stall:
                continue
            try:
                upstream = socket.create_connection((HOST, self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._guard:
                self.forwarded += 1
                self._open += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), name="stalling-proxy-pump",
                                 daemon=True).start()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
