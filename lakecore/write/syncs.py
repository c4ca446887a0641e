"""Data files made durable off the task threads: a task that has written a file hands its fsync to a
thread of its own and goes on to its next file group, and the write waits for every sync before its
commit point (`wait`), so a completed instant still names only durable files.

Inline, a thread that writes two file groups waited for the first file's fsync (~0.1 s for a 170 MB
file here) before it began encoding the second: on a bulk insert of 16M rows into 4 groups on 2 cores
that was a tenth of the write's wall time (docs/benchmarks.md, fourteenth pass). A sync that fails
fails the write (`wait` raises it), which then rolls back as for any failed task.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor, wait
from threading import Lock
from types import TracebackType

from lakecore.storage import Storage


class BackgroundSyncs:
    """`submit(storage, path)` starts `storage.sync(path)` on one of `threads` threads; `wait()`
    returns once every submitted sync has finished and raises the first that failed. A context
    manager: leaving it waits for what is still running (errors then are the caller's to see through
    `wait`, or dropped when the write already failed) and stops the threads."""

    def __init__(self, threads: int = 2) -> None:
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="weir-sync")
        self._futures: list[Future[None]] = []
        self._lock = Lock()

    def submit(self, storage: Storage, path: str) -> None:
        future = self._pool.submit(storage.sync, path)
        with self._lock:
            self._futures.append(future)

    def wait(self) -> None:
        with self._lock:
            futures = list(self._futures)
        wait(futures)
        for f in futures:
            if (error := f.exception()) is not None:
                raise error

    def __enter__(self) -> BackgroundSyncs:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._pool.shutdown(wait=True)
