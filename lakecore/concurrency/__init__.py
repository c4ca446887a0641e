"""Concurrency, carved by role (as Hudi's client separates transaction, lock and heartbeat code):

- `transaction.py`: the write protocol (begin, commit under the lock, roll back); `rollback.py`: rolling
  back failed writes; `activity.py`: what goes on at a table right now (reads every role below);
- `conflicts/`: do two writes conflict (at commit, early in a writer, seen from outside), which schema;
- `liveness/`: heartbeats and proofs of death, service run claims, the writer registry, abort flags;
- `locks/`: the table lock's protocol, its providers and the choice among them;
- `zookeeper/`: the kazoo client plumbing; `processes.py`: whether a recorded process has ended.

Layered in that order (import-linter contract "concurrency by role"). The names below are the public
surface; the lock on ZooKeeper (`locks.zookeeper`) is not re-exported: importing it imports kazoo.
"""

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

__all__ = ["InProcessLock", "Lock", "StorageLock", "TableLock", "WriteTransaction", "begin_write",
           "check_lock", "commit_write", "draw_instant", "ensure_held", "lock_for_spec",
           "lock_from_options", "replaced_groups", "rollback_failed_writes", "rollback_write", "spec_of",
           "view_for_services", "view_of"]
