"""Child process for the every-phase crash tests of compaction, clean, savepoint, restore and rollback:
runs one service and SIGKILLs itself right after the Nth storage call of a kind whose path matches a
regular expression (patched on the table's storage instance: the product has no hooks).

    python -m tests.lakecore.services.service_crash URI SERVICE ARG METHOD PATH_REGEX NTH

SERVICE: compact (schedule + run, one worker), clean (keep_latest_commits 1), savepoint ARG,
restore ARG (the savepoint), rollback ARG (the write). Exits 3 when the kill point was never reached,
so the test names the phase that no longer exists.
"""

from __future__ import annotations

import os
import re
import signal
import sys

CLEAN_POLICY = ("keep_latest_commits", 1)


def main() -> None:
    from lakecore import Table
    from lakecore.concurrency import InProcessLock
    from lakecore.services import CleanPolicy, run_clean, run_compaction, schedule_compaction

    uri, service, arg, method, part, nth = sys.argv[1:7]
    pattern = re.compile(part)
    t = Table.open(uri, lock=InProcessLock(uri))  # a storage lock would outlive the kill until it expires
    real = getattr(t.storage, method)
    seen = 0

    def patched(path, *a, **kw):
        nonlocal seen
        out = real(path, *a, **kw)
        if pattern.search(path):
            seen += 1
            if seen == int(nth):
                os.kill(os.getpid(), signal.SIGKILL)
        return out

    setattr(t.storage, method, patched)
    if service == "compact":
        plan = schedule_compaction(t.storage, t.config, t.lock)
        if plan is not None:
            run_compaction(t.storage, t.config, t.lock, plan, workers=1)
    elif service == "clean":
        run_clean(t.storage, t.config, t.lock, CleanPolicy(*CLEAN_POLICY), dry_run=False)  # type: ignore[arg-type]
    elif service == "savepoint":
        t.maintenance.savepoint(arg)
    elif service == "restore":
        t.maintenance.restore(arg, dry_run=False)
    elif service == "rollback":
        t.maintenance.rollback(arg, dry_run=False)
    else:
        sys.exit(f"unknown service {service}")
    sys.exit(3)  # the crash point was never reached: the test says which phase is missing


if __name__ == "__main__":
    main()
