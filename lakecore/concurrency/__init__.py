"""Concurrency: locks, the write transaction protocol, rollback of failed writes."""

from lakecore.concurrency.locks.choice import TableLock, check_lock, lock_for_spec, lock_from_options
from lakecore.concurrency.locks.in_process import InProcessLock
from lakecore.concurrency.locks.protocol import Lock, ensure_held, spec_of
from lakecore.concurrency.locks.storage import StorageLock
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

# ZooKeeperLock lives in lakecore.concurrency.locks.zookeeper, not re-exported: importing it imports kazoo.
__all__ = ["InProcessLock", "Lock", "StorageLock", "TableLock", "WriteTransaction", "begin_write",
           "check_lock", "commit_write", "draw_instant", "ensure_held", "lock_for_spec",
           "lock_from_options", "replaced_groups", "rollback_failed_writes", "rollback_write", "spec_of",
           "view_for_services", "view_of"]
