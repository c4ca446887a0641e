"""Lock providers under test: each `LockBench` makes independent lock objects on one table. The storage
lock runs on local disk and on the S3 emulator ("storage-s3")."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from lakecore.concurrency import Lock, lock_from_options
from lakecore.storage import Storage, open_storage


@dataclass
class LockBench:
    """One table and the lock options every contender for its lock uses (as a table would)."""

    provider: str
    storage: Storage
    options: dict[str, Any]
    storage_options: dict[str, Any] | None = None
    made: list[Lock] = field(default_factory=list)

    def worker_options(self) -> str:
        """The lock options (and the storage's) for a lock_worker process, as JSON."""
        return json.dumps({**self.options, "storage_options": self.storage_options})

    def new_lock(self, **overrides: Any) -> Lock:
        lock = lock_from_options(self.storage, {**self.options, **overrides})
        self.made.append(lock)
        return lock

    def close(self) -> None:
        for lock in self.made:
            close = getattr(lock, "close", None)
            if close is not None:
                close()
            else:
                lock.release()


S3 = pytest.param("storage-s3", marks=pytest.mark.s3)
PROVIDERS = ["in_process", "storage", S3, pytest.param("zookeeper", marks=pytest.mark.zookeeper)]
CROSS_PROCESS = ["storage", S3, pytest.param("zookeeper", marks=pytest.mark.zookeeper)]


def make_bench(request: pytest.FixtureRequest, provider: str, tmp_path: Path) -> Iterator[LockBench]:
    storage_options = None
    if provider == "storage-s3":
        server = request.getfixturevalue("s3_server")
        bucket = f"weir-{uuid.uuid4().hex[:12]}"
        server.client().create_bucket(Bucket=bucket)
        uri, storage_options, provider = f"s3://{bucket}/table", server.s3fs_options(), "storage"
    else:
        uri = str(tmp_path / "table")
    storage = open_storage(uri, storage_options)
    # the S3 emulator answers some 50 requests a second to all threads of the test: contenders queue longer
    options: dict[str, Any] = {"provider": provider, "acquire_timeout_s": 30.0 if storage_options else 10.0}
    if provider == "zookeeper":
        server = request.getfixturevalue("zookeeper_server")
        options |= {"connect": server.connect_string, "base_path": f"/weir-tests/{uuid.uuid4().hex[:8]}",
                    "session_timeout_s": 4.0, "connection_timeout_s": 5.0}
    bench = LockBench(provider, storage, options, storage_options)
    yield bench
    bench.close()
    if provider == "zookeeper":
        from lakecore.concurrency.zookeeper import close_shared_clients

        close_shared_clients()


@pytest.fixture(params=PROVIDERS)
def bench(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LockBench]:
    yield from make_bench(request, request.param, tmp_path)


@pytest.fixture(params=CROSS_PROCESS)
def cross_process_bench(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LockBench]:
    yield from make_bench(request, request.param, tmp_path)
