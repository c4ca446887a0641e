"""Child process for the publish crash tests: publishes one target and SIGKILLs itself right after the
Nth call to the table storage's write, write_if_absent, delete or sync (patched on the table's storage
instance: the product has no hooks).

    python -m tests.lakecore.publish.publish_crash URI TARGET KEEP NTH

Exits 3 when the kill point was never reached.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from typing import Any

METHODS = ("write", "write_if_absent", "delete", "sync")


def count_calls(storage: Any, after: Callable[[int], None]) -> None:
    """Patch `storage` so that `after(n)` runs after its nth call to one of METHODS."""
    seen = 0
    for name in METHODS:
        real = getattr(storage, name)

        def patched(path: str, *a: Any, _real: Any = real, **kw: Any) -> Any:
            nonlocal seen
            out = _real(path, *a, **kw)
            seen += 1
            after(seen)
            return out

        setattr(storage, name, patched)


def main() -> None:
    from lakecore import Table
    from lakecore.concurrency import InProcessLock

    uri, target, keep, nth = sys.argv[1:5]
    t = Table.open(uri, lock=InProcessLock(uri))
    count_calls(t.storage, lambda n: os.kill(os.getpid(), signal.SIGKILL) if n == int(nth) else None)
    t.publish(target, keep=int(keep))
    sys.exit(3)


if __name__ == "__main__":
    main()
