"""Concurrency: locks, the write transaction protocol, rollback of failed writes."""

from lakecore.concurrency.locks import (
    InProcessLock,
    Lock,
    LockAlreadyHeld,
    LockUnavailable,
    LockUnsupported,
    StorageLock,
    ensure_held,
    lock_from_options,
)
from lakecore.concurrency.rollback import rollback_failed_writes, rollback_write
from lakecore.concurrency.transaction import (
    WriteTransaction,
    begin_write,
    commit_write,
    draw_instant,
    replaced_groups,
    view_for_services,
    view_of,
)

# ZooKeeperLock lives in lakecore.concurrency.zookeeper, not re-exported: importing it imports kazoo.
__all__ = ["InProcessLock", "Lock", "LockAlreadyHeld", "LockUnavailable", "LockUnsupported", "StorageLock",
           "WriteTransaction", "begin_write", "commit_write", "draw_instant", "ensure_held",
           "lock_from_options", "replaced_groups", "rollback_failed_writes", "rollback_write",
           "view_for_services", "view_of"]
