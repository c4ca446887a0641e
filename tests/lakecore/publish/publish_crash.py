"""Child process for the publish crash tests: publishes one target and SIGKILLs itself right after the
Nth call to the table storage's write, write_if_absent, delete or sync (patched on the table's storage
instance: the product has no hooks). With CATALOG (a SQLite file), it publishes through pyiceberg's SQL
catalog there, and the SQL statements and transaction commits of the catalog's sessions count too.

    python -m tests.lakecore.publish.publish_crash URI TARGET KEEP NTH [CATALOG]

TARGET: iceberg, iceberg-v3 (format version 3: deletion vectors) or delta.

Exits 3 when the kill point was never reached.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

METHODS = ("write", "write_if_absent", "delete", "sync")


def count_calls(storage: Any, after: Callable[[int], None], *, sql: bool = False) -> None:
    """Patch `storage` so that `after(n)` runs after its nth call to one of METHODS (`sql`: or of
    SQLAlchemy's Session.execute and Session.commit, what pyiceberg's SQL catalog runs)."""
    seen = 0

    def counted(owner: Any, name: str) -> None:
        real = getattr(owner, name)

        def patched(*a: Any, **kw: Any) -> Any:
            nonlocal seen
            out = real(*a, **kw)
            seen += 1
            after(seen)
            return out

        setattr(owner, name, patched)

    for name in METHODS:
        counted(storage, name)
    if sql:
        from sqlalchemy.orm import Session

        counted(Session, "execute")
        counted(Session, "commit")


def publish_options(target: str) -> tuple[str, dict[str, Any]]:
    """(the format, Table.publish's keywords) of a TARGET argument."""
    if target == "iceberg-v3":
        return "iceberg", {"format_version": 3}
    return target, {}


def sql_catalog(path: str) -> Any:
    """The CatalogRef of a SQLite-backed pyiceberg catalog at `path` (table lake.events)."""
    from lakecore.publish import CatalogRef

    return CatalogRef("lake.events", {"type": "sql", "uri": f"sqlite:///{path}",
                                      "warehouse": f"file://{os.path.dirname(path)}"}, "crash")


def main() -> None:
    from lakecore import Table
    from lakecore.concurrency import InProcessLock

    uri, target, keep, nth, *catalog = sys.argv[1:6]
    t = Table.open(uri, lock=InProcessLock(uri))
    count_calls(t.storage, lambda n: os.kill(os.getpid(), signal.SIGKILL) if n == int(nth) else None,
                sql=bool(catalog))
    fmt, options = publish_options(target)
    t.publish(fmt, keep=int(keep), catalog=sql_catalog(catalog[0]) if catalog else None, **options)
    sys.exit(3)


if __name__ == "__main__":
    main()
