"""Child process for the archival crash tests: runs an archival and SIGKILLs itself right after the
Nth storage call of a kind whose path contains a marker (patched here: the product has no hooks).

    python -m tests.lakecore.services.archival_crash URI METHOD PATH_PART NTH MIN MAX FANOUT
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    from lakecore import Table
    from lakecore.concurrency import InProcessLock
    from lakecore.services import ArchivalPolicy

    uri, method, part, nth = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    policy = ArchivalPolicy(int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]))
    t = Table.open(uri, lock=InProcessLock(uri))  # a storage lock would outlive the kill until it expires
    real = getattr(t.storage, method)
    seen = 0

    def patched(path, *a, **kw):
        nonlocal seen
        out = real(path, *a, **kw)
        if part in path:
            seen += 1
            if seen == nth:
                os.kill(os.getpid(), signal.SIGKILL)
        return out

    setattr(t.storage, method, patched)
    t.maintenance.archive(policy)
    sys.exit(3)  # the crash point was never reached: the test says which phase is missing


if __name__ == "__main__":
    main()
