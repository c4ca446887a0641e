"""Batched markers through a marker service in the writer's driver (Hudi's timeline-server markers).

Owns: `MarkerService`, an HTTP server in the driver process that executors ask to create markers. It
queues requests per instant, and every `batch_interval_s` writes each instant's pending markers into
one of `num_files` files `.weir/markers/<T>/MARKERS<i>` (index round-robin among the files not being
written; each file rewritten whole, atomically, with every marker ever assigned to it), beside
`.weir/markers/<T>/MARKERS.type`. A request is answered only once its marker is durable.
`MarkerClient` is what executors call (picklable); `ServiceMarkers` plugs a client into the write
path as a `MarkerWriter`. Entries are the direct-marker names, so `markers.list_markers` reads both.

Must not: decide conflicts. Early conflict detection plugs in through `set_conflict_checker` (a
periodic asynchronous check per instant) and `reject`; once an instant is rejected, every later
marker request for it is refused with the message, and the client raises `EarlyConflict`.

Wire protocol (JSON over HTTP, one request per connection):
  POST /v1/markers/<T>  {"data_path": ..., "io_type": ...} -> 200 {"created": bool} once durable;
                        409 conflict, 400 bad request, 500 store failed (retryable),
                        503 stopping, 410 instant's markers deleted meanwhile
  GET  /v1/markers/<T>  -> 200 {"markers": [...]}  (flushed and pending)
"""

from __future__ import annotations

import http.client
import json
import logging
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

from lakecore.errors import EarlyConflict, InvalidInput, InvalidTableConfig, MarkerServiceError
from lakecore.storage import Storage, join
from lakecore.write.markers import (
    BATCHED_TYPE,
    IO_TYPES,
    MARKER_TYPE_FILE,
    MARKERS_DIR,
    Marker,
    batch_file,
    delete_markers,
    is_batch_file,
    read_batch_file,
)

log = logging.getLogger(__name__)

ConflictChecker = Callable[[str, list[str]], str | None]
_INSTANT = re.compile(r"[0-9A-Za-z_-]+")
_API = "/v1/markers/"


def marker_name(instant_time: str, data_path: str, io_type: str) -> str:
    """The entry of a marker in a MARKERS file: its direct-marker path relative to the instant's dir."""
    if not _INSTANT.fullmatch(instant_time):
        raise InvalidInput(f"instant time {instant_time!r} is not a valid marker dir name; pass the "
                           "writer's 17-digit instant time")
    if io_type not in IO_TYPES:
        raise InvalidInput(f"marker IO type {io_type!r} is unknown; use one of {', '.join(IO_TYPES)}")
    path = data_path.strip("/")
    if not path or any(c in path for c in "\r\n") or ".." in path.split("/"):
        raise InvalidInput(f"data file path {data_path!r} cannot name a marker; pass the data file's "
                           "path relative to the table base")
    return f"{path}.marker.{io_type}"


def advertised_host(bind_host: str, advertise_host: str | None) -> str:
    """The host executors are told to call: the one asked for, else the bound address, else (bound to
    every interface) this machine's name."""
    if advertise_host:
        return advertise_host
    if bind_host in ("0.0.0.0", "", "::"):  # listening everywhere: executors on other hosts use our name
        return socket.getfqdn()
    return bind_host


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


# -- the service -------------------------------------------------------------------------------


@dataclass(eq=False)
class _Instant:
    """What the service knows of one instant's markers. Guarded by `MarkerService._lock`."""

    files: list[list[str]]                  # entries of MARKERS<i>, durable or being written
    known: dict[str, Future[None]] = field(default_factory=dict)  # name -> done once durable
    pending: list[str] = field(default_factory=list)
    writing: set[int] = field(default_factory=set)
    next_index: int = 0
    type_written: bool = False
    conflict: str | None = None

    def take_free_index(self) -> int | None:
        n = len(self.files)
        for k in range(n):
            i = (self.next_index + k) % n
            if i not in self.writing:
                self.next_index = (i + 1) % n
                return i
        return None


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class MarkerService:
    """Creates markers for the executors of one driver, batched into MARKERS files.

    `num_threads` (default `num_files`) bounds the parallel file writes. At most one write per file
    index is in flight, so one instant never needs more than `num_files` threads; more only help when
    several instants flush at once. One-shot: `start()`, then `stop()` flushes and ends it.

    `host` is the address it listens on; `advertise_host` the name executors reach it by (in its URL):
    by default `host` itself, or this machine's name when `host` is every interface (0.0.0.0, "::").
    Executors on other hosts need both set: listen where they can reach, advertise what they resolve.
    """

    def __init__(self, storage: Storage, *, batch_interval_s: float = 0.05, num_files: int = 20,
                 num_threads: int | None = None, host: str = "127.0.0.1", port: int = 0,
                 advertise_host: str | None = None, request_timeout_s: float = 300.0) -> None:
        threads = num_files if num_threads is None else num_threads
        if batch_interval_s <= 0 or num_files < 1 or threads < 1 or request_timeout_s <= 0:
            raise InvalidTableConfig(
                f"marker service needs batch_interval_s > 0, num_files >= 1, num_threads >= 1 and "
                f"request_timeout_s > 0 (got {batch_interval_s}, {num_files}, {threads}, "
                f"{request_timeout_s}); fix the write options")
        self._storage = storage
        self._interval = batch_interval_s
        self._num_files = num_files
        self._num_threads = threads
        self._address = (host, port)
        self._advertise = advertise_host
        self._request_timeout = request_timeout_s
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a write finished
        self._instants: dict[str, _Instant] = {}
        self._in_flight = 0
        self._started = False
        self._stopping = False
        self._halt = threading.Event()
        self._checker: tuple[ConflictChecker, float] | None = None
        self._checker_thread: threading.Thread | None = None
        self._server: _Server | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._http_thread: threading.Thread | None = None
        self._flusher: threading.Thread | None = None
        self._url = ""

    # -- lifecycle

    def start(self) -> str:
        """Start serving; returns the URL to give `MarkerClient`."""
        with self._lock:
            if self._started:
                raise RuntimeError("a MarkerService starts once; create a new one")
            self._started = True
        try:
            server = _Server6 if ":" in self._address[0] else _Server
            self._server = server(self._address, _Handler)
        except OSError as e:
            raise MarkerServiceError(f"the marker service cannot listen on {self._address}: {e}; pass "
                                     "port=0 to take any free port, or use direct markers") from e
        self._pool = ThreadPoolExecutor(self._num_threads, thread_name_prefix="weir-markers-write")
        self._server.service = self
        self._url = f"http://{_url_host(advertised_host(self._address[0], self._advertise))}:" \
                    f"{self._server.server_port}"
        self._http_thread = _daemon("weir-markers-http", self._serve)
        self._flusher = _daemon("weir-markers-flush", self._flush_loop)
        with self._lock:
            if self._checker is not None:
                self._start_checker()
        return self._url

    @property
    def url(self) -> str:
        if not self._url:
            raise RuntimeError("the marker service is not started; call start() first")
        return self._url

    def stop(self) -> None:
        """Refuse new requests, make every pending marker durable (answering its request), then stop."""
        with self._lock:
            if self._server is None or self._stopping:  # never started, or start() failed
                return
            self._stopping = True
        self._halt.set()
        assert self._server and self._pool and self._http_thread and self._flusher
        self._flusher.join()
        if self._checker_thread is not None:
            self._checker_thread.join(timeout=10.0)  # one stuck in its callback is a daemon: leave it
        self._drain()
        self._server.shutdown()
        self._server.server_close()
        self._http_thread.join()
        self._pool.shutdown(wait=True)

    def __enter__(self) -> MarkerService:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _serve(self) -> None:
        assert self._server is not None
        self._server.serve_forever(poll_interval=0.05)

    # -- markers

    def all_markers(self, instant_time: str) -> list[str]:
        """Every marker of the instant this service knows, flushed or pending, sorted."""
        with self._lock:
            st = self._instants.get(instant_time)
            return sorted(st.known) if st else []

    def delete_markers(self, instant_time: str) -> None:
        """After the instant completed or was rolled back: forget it and delete its marker files."""
        with self._lock:
            st = self._instants.pop(instant_time, None)
            while st is not None and st.writing:  # a late write would bring a deleted file back
                self._changed.wait()
            orphans = [st.known[n] for n in st.pending] if st else []
            if st:
                st.pending = []
        for fut in orphans:  # 410, not retried: a retry would create the marker dir anew
            fut.set_exception(_Refused(410, f"the markers of {instant_time} were deleted before this one "
                                            "was written: the instant is finished; stop writing for it"))
        delete_markers(self._storage, instant_time)

    def _create(self, instant_time: str, data_path: str, io_type: str) -> bool:
        """Block until the marker is durable; False when it already existed. Raises _Refused."""
        try:
            name = marker_name(instant_time, data_path, io_type)
        except InvalidInput as e:
            raise _Refused(400, str(e)) from None
        while True:
            st = self._state(instant_time)
            with self._lock:
                if self._instants.get(instant_time) is not st:
                    continue  # deleted meanwhile
                if self._stopping:
                    raise _Refused(503, f"the marker service at {self._url} is stopping: its writer is "
                                        "finishing; this task cannot create markers any more")
                if st.conflict is not None:
                    raise _Refused(409, st.conflict)
                fut = st.known.get(name)
                created = fut is None
                if fut is None:
                    fut = st.known[name] = Future()
                    st.pending.append(name)
                break
        try:
            fut.result(timeout=self._request_timeout)
        except FutureTimeout:
            raise _Refused(500, f"marker {name} of {instant_time} was not written within "
                                f"{self._request_timeout}s; the table storage may be stalled") from None
        except MarkerServiceError as e:
            raise _Refused(500, str(e)) from None  # retryable: the retry queues the marker again
        return created

    def _state(self, instant_time: str) -> _Instant:
        with self._lock:
            st = self._instants.get(instant_time)
        if st is not None:
            return st
        loaded = self._load(instant_time)  # outside the lock: storage I/O
        with self._lock:
            return self._instants.setdefault(instant_time, loaded)

    def _load(self, instant_time: str) -> _Instant:
        """Markers already in MARKERS files (a restarted driver), so round-robin never drops them."""
        st = _Instant(files=[[] for _ in range(self._num_files)])
        done: Future[None] = Future()
        done.set_result(None)
        for f in self._storage.list_dir(join(MARKERS_DIR, instant_time)):
            base = f.path.rsplit("/", 1)[-1]
            if base == MARKER_TYPE_FILE:
                st.type_written = True
            elif is_batch_file(base):
                names = read_batch_file(self._storage, f.path)
                if int(base[7:]) < self._num_files:  # more files than now: stay on disk, never rewritten
                    st.files[int(base[7:])] = names
                st.known.update((n, done) for n in names)
        return st

    # -- flushing

    def _flush_loop(self) -> None:
        due = time.monotonic()
        while True:  # at a fixed rate: a slow flush does not stretch the interval
            due = max(due + self._interval, time.monotonic())
            if self._halt.wait(due - time.monotonic()):
                return
            self._flush_once()

    def _flush_once(self) -> None:
        jobs = []
        with self._lock:
            for t, st in self._instants.items():
                if not st.pending:
                    continue
                i = st.take_free_index()
                if i is None:
                    continue  # every file of this instant is being written: next tick
                batch, st.pending = st.pending, []
                st.files[i].extend(batch)
                st.writing.add(i)
                content = ("\n".join(st.files[i]) + "\n").encode()
                jobs.append((t, st, i, batch, content, not st.type_written))
                self._in_flight += 1
        assert self._pool is not None
        for job in jobs:
            self._pool.submit(self._write, *job)

    def _write(self, instant_time: str, st: _Instant, index: int, batch: list[str], content: bytes,
               with_type: bool) -> None:
        error: Exception | None = None
        try:
            if with_type:
                self._storage.write(join(MARKERS_DIR, instant_time, MARKER_TYPE_FILE), BATCHED_TYPE)
            self._storage.write(batch_file(instant_time, index), content)
        except Exception as e:
            error = e
        with self._lock:
            futures = [st.known[n] for n in batch]
            st.writing.discard(index)
            if error is None:
                st.type_written = st.type_written or with_type
            else:  # not durable: forget the batch so a retried request adds it again
                del st.files[index][len(st.files[index]) - len(batch):]
                for n in batch:
                    del st.known[n]
            self._in_flight -= 1
            self._changed.notify_all()
        for fut in futures:
            if error is None:
                fut.set_result(None)
            else:
                fut.set_exception(MarkerServiceError(
                    f"could not write {batch_file(instant_time, index)}: {error}; the marker was not "
                    "created: retry the task once the table storage is reachable"))

    def _drain(self) -> None:
        while True:
            self._flush_once()
            with self._lock:
                if not self._in_flight and not any(st.pending for st in self._instants.values()):
                    return
                self._changed.wait(timeout=self._interval)

    # -- early conflict detection hook

    def set_conflict_checker(self, fn: ConflictChecker, period_s: float) -> None:
        """Every `period_s`, call `fn(instant_time, markers)` for each instant with markers and no
        conflict yet; a returned message rejects the instant (see `reject`). A checker that raises is
        logged and marker creation goes on (the commit-time check still guards correctness)."""
        if period_s <= 0:
            raise InvalidTableConfig(f"conflict check period must be > 0 (got {period_s}); fix the "
                                     "early conflict detection options")
        with self._lock:
            self._checker = (fn, period_s)
            if self._started and not self._stopping:
                self._start_checker()

    def reject(self, instant_time: str, message: str) -> None:
        """Refuse every later marker request of the instant (HTTP 409) with `message`. First one wins."""
        st = self._state(instant_time)
        with self._lock:
            if st.conflict is None:
                st.conflict = message
                log.info("marker requests of %s are refused from now on: %s", instant_time, message)

    def conflict(self, instant_time: str) -> str | None:
        """Why the instant's marker requests are refused, or None. The driver may poll it to stop early."""
        with self._lock:
            st = self._instants.get(instant_time)
            return st.conflict if st else None

    def _start_checker(self) -> None:  # holding the lock
        if self._checker_thread is None or not self._checker_thread.is_alive():
            self._checker_thread = _daemon("weir-markers-check", self._check_loop)

    def _check_loop(self) -> None:
        while True:
            with self._lock:
                assert self._checker is not None
                fn, period = self._checker
            if self._halt.wait(period):
                return
            with self._lock:
                active = [(t, sorted(st.known)) for t, st in self._instants.items()
                          if st.conflict is None and st.known]
            for t, names in active:
                try:
                    message = fn(t, names)
                except Exception:
                    log.exception("early conflict check of %s failed; marker creation goes on", t)
                    continue
                if message:
                    self.reject(t, message)


def _daemon(name: str, target: Callable[[], None]) -> threading.Thread:
    t = threading.Thread(target=target, name=name, daemon=True)
    t.start()
    return t


# -- HTTP ----------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default 5 drops connects of many tasks at once (1 s SYN retry)
    service: MarkerService


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = 60  # a client that stops sending mid-request frees its thread

    def do_POST(self) -> None:
        instant_time = self._instant()
        if instant_time is None:
            return
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            data_path, io_type = str(body["data_path"]), str(body["io_type"])
        except (ValueError, KeyError, TypeError) as e:
            self._reply(400, {"error": f"bad marker request ({e}); send data_path and io_type as JSON"})
            return
        try:
            created = self.server.service._create(instant_time, data_path, io_type)
        except _Refused as r:
            self._reply(r.status, {"error": r.message})
            return
        self._reply(200, {"created": created})

    def do_GET(self) -> None:
        instant_time = self._instant()
        if instant_time is not None:
            self._reply(200, {"markers": self.server.service.all_markers(instant_time)})

    def _instant(self) -> str | None:
        path = self.path.split("?", 1)[0]
        if path.startswith(_API) and _INSTANT.fullmatch(path[len(_API):]):
            return path[len(_API):]
        self._reply(404, {"error": f"no such resource {self.path}; use {_API}<instant time>"})
        return None

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("marker service: " + format, *args)


# -- the executor side ---------------------------------------------------------------------------


_RETRY_STATUSES = frozenset({500, 502, 504})


@dataclass(frozen=True)
class MarkerClient:
    """Asks a `MarkerService` to create markers. Holds only its settings, so it pickles into tasks.

    Each call makes at most `attempts` tries (capped exponential backoff with jitter) and gives up
    after `timeout_s` in all, so it never hangs. Retrying a create is safe: the service dedupes.
    """

    url: str
    timeout_s: float = 30.0
    attempts: int = 4
    backoff_s: float = 0.05

    def create(self, instant_time: str, data_path: str, io_type: str) -> None:
        """Return once the marker is durable. Raises EarlyConflict when the service refused the instant,
        MarkerServiceError when it cannot be reached or cannot write, InvalidInput for a bad name."""
        marker_name(instant_time, data_path, io_type)
        status, body = self._call("POST", instant_time, {"data_path": data_path, "io_type": io_type})
        if status == 200:
            return
        message = str(body.get("error", body))
        if status == 409:
            raise EarlyConflict(message, instant=instant_time)
        if status == 400:
            raise InvalidInput(message)
        raise MarkerServiceError(f"marker service at {self.url} refused the marker of {data_path} "
                                 f"(HTTP {status}): {message}")

    def markers(self, instant_time: str) -> list[str]:
        """Every marker of the instant the service knows (flushed or pending)."""
        status, body = self._call("GET", instant_time, None)
        if status != 200:
            raise MarkerServiceError(f"marker service at {self.url} could not list the markers of "
                                     f"{instant_time} (HTTP {status}): {body.get('error', body)}")
        return [str(m) for m in body["markers"]]

    def _call(self, method: str, instant_time: str, payload: dict[str, str] | None
              ) -> tuple[int, dict[str, Any]]:
        parts = urlsplit(self.url)
        if parts.scheme != "http" or not parts.hostname:
            raise MarkerServiceError(f"marker service URL {self.url!r} is not http://host:port; pass the "
                                     "URL MarkerService.start() returned")
        path = _API + quote(instant_time)
        data = json.dumps(payload).encode() if payload is not None else None
        deadline = time.monotonic() + self.timeout_s
        last = "no attempt made"
        for attempt in range(max(1, self.attempts)):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=remaining)
            try:
                conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                status, raw = resp.status, resp.read()
            except (OSError, http.client.HTTPException) as e:
                last = f"{type(e).__name__}: {e}"
            else:
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"error": raw[:200].decode("utf-8", errors="replace")}
                if status not in _RETRY_STATUSES:
                    return status, body
                last = f"HTTP {status}: {body.get('error', body)}"
            finally:
                conn.close()
            if attempt + 1 < self.attempts:
                pause = min(self.backoff_s * 2 ** attempt, 1.0) * random.uniform(0.5, 1.0)
                time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
        raise MarkerServiceError(
            f"marker service at {self.url} did not answer {method} for instant {instant_time} within "
            f"{self.attempts} attempts / {self.timeout_s}s (last: {last}); check that the writer's "
            "driver is running and reachable from this task, then retry the task")


@dataclass(frozen=True)
class ServiceMarkers:
    """A `MarkerWriter` that creates markers through the driver's marker service (batched markers)."""

    client: MarkerClient

    def create(self, storage: Storage, marker: Marker, partition: str, file_id: str) -> None:
        self.client.create(marker.instant_time, marker.data_path, marker.io_type)
