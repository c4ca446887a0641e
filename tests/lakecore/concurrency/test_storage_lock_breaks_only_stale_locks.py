"""The storage lock breaks a lock file only once it has expired, and refuses storage that cannot create
a file atomically."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from lakecore.concurrency.locks import LockUnsupported, StorageLock, lock_from_options
from lakecore.errors import LockTimeout
from lakecore.storage import open_storage
from lakecore.storage.fsspec_store import FsspecStorage
from tests.lakecore.concurrency.test_lock_contract import in_thread


def test_an_expired_lock_file_is_broken(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path / "table"))
    storage.write(StorageLock.PATH, json.dumps({"owner": "ghost:1:gone", "token": "t0",
                                                "expires": time.time() - 1}).encode())
    lock = StorageLock(storage)
    started = time.monotonic()
    lock.acquire(timeout=5)
    assert time.monotonic() - started < 1.0
    assert lock.is_held()
    assert json.loads(storage.read(StorageLock.PATH))["token"] != "t0"
    lock.release()
    assert not storage.exists(StorageLock.PATH)


def test_a_live_owners_lock_file_is_left_alone(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path / "table"))
    holder, contender = StorageLock(storage, expiry_s=60), StorageLock(storage)
    holder.acquire()
    before = storage.read(StorageLock.PATH)
    error = in_thread(lambda: contender.acquire(timeout=0.3))
    assert isinstance(error, LockTimeout)
    assert json.loads(before)["owner"] in str(error)  # names the holder
    assert storage.read(StorageLock.PATH) == before and holder.is_held()
    holder.release()


def test_a_holder_past_its_expiry_loses_the_lock_and_its_release_spares_the_next_holder(
    tmp_path: Path,
) -> None:
    storage = open_storage(str(tmp_path / "table"))
    slow, next_holder = StorageLock(storage, expiry_s=0.3), StorageLock(storage)
    slow.acquire()
    time.sleep(0.4)
    assert not slow.is_held()  # so ensure_held stops it before it completes an instant
    next_holder.acquire(timeout=2)
    slow.release()
    assert next_holder.is_held()
    next_holder.release()


def test_storage_without_atomic_create_is_refused(tmp_path: Path) -> None:
    storage = FsspecStorage(f"file://{tmp_path}/table")  # fsspec's local files: no create-if-absent
    for lock in (StorageLock(storage), lock_from_options(storage, {"provider": "storage"})):
        with pytest.raises(LockUnsupported, match=r"atomic create-if-absent.*'zookeeper'") as raised:
            lock.acquire(timeout=5)
        assert not raised.value.retryable
        assert not lock.is_held()
        lock.release()
    assert not (tmp_path / "table" / ".weir" / "lock").exists()
