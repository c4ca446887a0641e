"""Concurrency: locks, the write transaction protocol, rollback of failed writes."""

from lakecore.concurrency.locks import InProcessLock, Lock, StorageLock, ensure_held
from lakecore.concurrency.transaction import (
    WriteTransaction,
    begin_write,
    commit_write,
    draw_instant,
    rollback_write,
    view_of,
)

__all__ = ["InProcessLock", "Lock", "StorageLock", "WriteTransaction", "begin_write", "commit_write",
           "draw_instant", "ensure_held", "rollback_write", "view_of"]
