"""Table services: work that rewrites a table's files without changing its contents.

Compaction (merge-on-read): `compaction_plan.py` decides what to compact (pure), `compaction.py`
schedules, executes and commits it. Clean: `clean_plan.py` decides which superseded files a retention
policy lets go (pure), `clean.py` rolls back dead writes, deletes and records a clean instant.
Services sit above `concurrency` and below `table`.
"""

from lakecore.services.clean import check_readable, pending_cleans, run_clean
from lakecore.services.clean_plan import CleanOperation, CleanPlan, CleanPolicy, all_slices, plan_clean
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
from lakecore.services.errors import CompactionPending, FilesCleaned, ServiceError

__all__ = ["CleanOperation", "CleanPlan", "CleanPolicy", "CompactionOperation", "CompactionPending",
           "CompactionPlan", "CompactionStrategy", "FilesCleaned", "ServiceError", "all_slices",
           "check_readable", "execute_operation", "pending_cleans", "pending_compactions", "plan_clean",
           "plan_compaction", "rollback_compaction", "run_clean", "run_compaction", "schedule_compaction"]
