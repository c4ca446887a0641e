"""Child process for the clustering crash tests: SIGKILLs itself at a chosen phase (patched here,
so the product code carries no test hooks).

    python -m tests.lakecore.services.clustering_crash URI PHASE [PLAN_INSTANT]

PHASE: after_requested (schedule, then die), mid_execute (die right after the first new base file),
before_complete (die after every file, before the commit), after_complete (die before the markers
are deleted).
"""

from __future__ import annotations

import os
import signal
import sys


def _die(*_a: object, **_kw: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    import lakecore.services.clustering as clustering
    from lakecore import Table
    from lakecore.services import (
        ClusteringStrategy,
        load_clustering_plan,
        run_clustering,
        schedule_clustering,
    )

    t = Table.open(sys.argv[1])
    phase = sys.argv[2]
    if phase == "after_requested":
        schedule_clustering(t.storage, t.config, t.lock, ClusteringStrategy("all", ("name",)))
        _die()
    if phase == "mid_execute":
        real_write = clustering.write_data_file

        def once(*a, **kw):
            written = real_write(*a, **kw)
            _die()
            return written
        clustering.write_data_file = once  # type: ignore[assignment]
    elif phase == "before_complete":
        real_tasks = clustering.run_tasks

        def then_die(*a, **kw):
            real_tasks(*a, **kw)
            _die()
        clustering.run_tasks = then_die  # type: ignore[assignment]
    elif phase == "after_complete":  # the completed file is written, the markers are not deleted yet
        from lakecore.timeline import TimelineStore
        real_complete = TimelineStore.complete

        def complete_then_die(self, *a, **kw):
            real_complete(self, *a, **kw)
            _die()
        TimelineStore.complete = complete_then_die  # type: ignore[method-assign]
    run_clustering(t.storage, t.config, t.lock, load_clustering_plan(t.storage, sys.argv[3]), workers=1)


if __name__ == "__main__":
    main()
