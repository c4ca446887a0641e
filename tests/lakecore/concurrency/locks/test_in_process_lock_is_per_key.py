"""In-process locks: one per key in this process; a thread holding a key cannot take it again."""

from __future__ import annotations

import pytest

from lakecore.concurrency import InProcessLock
from lakecore.errors import LockAlreadyHeld, LockTimeout
from tests.lakecore.concurrency.locks.test_lock_contract import in_thread


def test_keys_are_independent_and_objects_of_one_key_exclude_each_other(tmp_path: object) -> None:
    key = f"{tmp_path}/orders"
    a, b, other_table = InProcessLock(key), InProcessLock(key), InProcessLock(f"{tmp_path}/customers")
    a.acquire()
    other_table.acquire(timeout=0.1)
    assert isinstance(in_thread(lambda: b.acquire(timeout=0.2)), LockTimeout)
    assert not b.is_held()
    with pytest.raises(LockAlreadyHeld, match="another lock object"):
        b.acquire(timeout=5)  # same thread, same key: a certain deadlock, refused at once
    a.release()
    other_table.release()
    with b:
        assert b.is_held() and not a.is_held()
