"""Table services: work that rewrites a table's files without changing its contents.

Compaction (merge-on-read): `compaction_plan.py` decides what to compact (pure), `compaction.py`
schedules, executes and commits it. Services sit above `concurrency` and below `table`.
"""

from lakecore.services.compaction import (
    execute_operation,
    pending_compactions,
    rollback_compaction,
    run_compaction,
    schedule_compaction,
)
from lakecore.services.compaction_plan import (
    CompactionOperation,
    CompactionPlan,
    CompactionStrategy,
    plan_compaction,
)
from lakecore.services.errors import CompactionPending, ServiceError

__all__ = ["CompactionOperation", "CompactionPending", "CompactionPlan", "CompactionStrategy", "ServiceError",
           "execute_operation", "pending_compactions", "plan_compaction", "rollback_compaction",
           "run_compaction", "schedule_compaction"]
