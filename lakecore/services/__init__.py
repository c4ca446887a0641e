"""Table services: work that rewrites a table's files without changing its contents.

Compaction (merge-on-read): `compaction_plan.py` decides what to compact (pure), `compaction.py`
schedules, executes and commits it. Clustering: `clustering_plan.py` decides which file groups to
rewrite into one sorted base file each (pure), `clustering.py` schedules, executes and commits it as a
replacecommit. Clean: `clean_plan.py` decides which superseded files a retention
policy lets go (pure), `clean.py` rolls back dead writes, deletes and records a clean instant.
Archival (`archive.py`) moves old completed instants into the history (timeline.history).
Savepoints (`savepoint.py`) pin a completed write for clean and restore; `rollback_completed.py`
undoes completed instants: the latest write (rollback) or all after a savepoint (restore).
`time_travel.py` says whether the table can be read as of a point. `repair.py` checks and repairs a
damaged table (`verify.py`: its data files; `rebuild.py`: a damaged instant's metadata from its files).
Services sit above `concurrency` and below `table`.
"""

from lakecore.services.archive import (
    ArchivalPlan,
    ArchivalPolicy,
    ArchivalResult,
    plan_archival,
    run_archival,
)
from lakecore.services.clean import pending_cleans, run_clean
from lakecore.services.clean_plan import CleanOperation, CleanPlan, CleanPolicy, all_slices, plan_clean
from lakecore.services.clustering import (
    commit_clustering,
    load_clustering_plan,
    pending_clusterings,
    rollback_clustering,
    run_clustering,
    schedule_clustering,
    start_clustering,
)
from lakecore.services.clustering_plan import (
    ClusteringOperation,
    ClusteringPlan,
    ClusteringStrategy,
    plan_clustering,
)
from lakecore.services.compaction import (
    commit_compaction,
    execute_operation,
    pending_compactions,
    rollback_compaction,
    run_compaction,
    schedule_compaction,
    start_compaction,
)
from lakecore.services.compaction_plan import (
    CompactionOperation,
    CompactionPlan,
    CompactionStrategy,
    plan_compaction,
)
from lakecore.services.rewrite import Running
from lakecore.services.savepoint import Savepoint, create_savepoint, delete_savepoint, list_savepoints
from lakecore.services.time_travel import check_readable, earliest_readable
from lakecore.services.triggers import Trigger, due
from lakecore.services.undo import UndoPlan, refuse_live, restore, resume_undos, rollback_completed

__all__ = ["ArchivalPlan", "ArchivalPolicy", "ArchivalResult", "CleanOperation", "CleanPlan",
           "CleanPolicy", "ClusteringOperation", "ClusteringPlan", "ClusteringStrategy",
           "CompactionOperation", "CompactionPlan", "CompactionStrategy", "Running", "Savepoint",
           "Trigger", "UndoPlan", "all_slices", "check_readable", "commit_clustering", "commit_compaction",
           "create_savepoint", "delete_savepoint", "due", "earliest_readable", "execute_operation",
           "list_savepoints", "load_clustering_plan", "pending_cleans", "pending_clusterings",
           "pending_compactions", "plan_archival", "plan_clean", "plan_clustering", "plan_compaction",
           "refuse_live", "restore", "resume_undos", "rollback_clustering", "rollback_compaction",
           "rollback_completed", "run_archival", "run_clean", "run_clustering", "run_compaction",
           "schedule_clustering", "schedule_compaction", "start_clustering", "start_compaction"]
