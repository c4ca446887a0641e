"""Child process for the crash test: runs a scheduled compaction and SIGKILLs itself right after
writing the first new base file (patched here, so the product code carries no test hooks).

    python -m tests.lakecore.services.compaction_crash URI PLAN_INSTANT
"""

from __future__ import annotations

import os
import signal
import sys


def main() -> None:
    import lakecore.services.compaction as compaction
    from lakecore import Table
    from lakecore.services import run_compaction
    from lakecore.services.compaction import load_plan

    real = compaction.write_data_file

    def once(*a, **kw):
        written = real(*a, **kw)
        os.kill(os.getpid(), signal.SIGKILL)
        return written

    compaction.write_data_file = once  # type: ignore[assignment]
    t = Table.open(sys.argv[1])
    run_compaction(t.storage, t.config, t.lock, load_plan(t.storage, sys.argv[2]), workers=1)


if __name__ == "__main__":
    main()
