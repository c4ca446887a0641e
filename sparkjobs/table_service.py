"""Entry point: run one table service on a table (the operator's TableService jobs).

    spark-submit sparkjobs/table_service.py --table URI --service compaction|clustering|clean|archival
    python -m sparkjobs.table_service ...       (a local Spark with every core: the embedded default)

Pending work a dead job left comes first. Prints one JSON line (sparkjobs.services.ServiceOutcome);
exit codes as sparkjobs.contract.EXIT_*: 0 done (also when nothing was due), 2 bad input (no such
table, a copy-on-write table asked to compact, an unknown strategy, a damaged data file), 3 a writer
won a conflict with the clustering, 4 another live job runs this service on the table now (it holds
the run claim: skip this run), 1 anything else (a run that failed half-way is resumed by the next one).
"""

from __future__ import annotations

import sys
from typing import Any

from sparkjobs.contract import TableServiceArgs
from sparkjobs.entry import open_table, run_job


def run(args: TableServiceArgs) -> dict[str, Any]:
    from lakecore.services import ArchivalPolicy, CleanPolicy, ClusteringStrategy, CompactionStrategy
    from sparkjobs import services

    table = open_table(args.table, args.zookeeper, args)
    if args.service == "clean":
        policy = CleanPolicy(args.clean_policy, args.clean_retained)  # type: ignore[arg-type]
        return services.clean(table, policy).to_json()
    if args.service == "archival":
        return services.archive(table, ArchivalPolicy(args.archive_min_instants,
                                                      args.archive_max_instants)).to_json()
    from sparkjobs.session import job_session

    spark = job_session(args.app_name)
    if args.service == "compaction":
        strategy = CompactionStrategy(args.compaction_strategy)  # type: ignore[arg-type]
        return services.compact(spark, table, strategy).to_json()
    clustering = ClusteringStrategy(args.clustering_strategy, args.sort_columns)  # type: ignore[arg-type]
    return services.cluster(spark, table, clustering).to_json()


def main(argv: list[str] | None = None) -> int:
    from lakecore.errors import (
        CleanPending,
        ClusteringPending,
        CompactionPending,
        InvalidInput,
        InvalidTableConfig,
        NotMergeOnRead,
        ServiceRunning,
        TableNotFound,
        WriteConflict,
    )

    return run_job(lambda: TableServiceArgs.from_argv(sys.argv[1:] if argv is None else argv), run,
                   done="done", bad_input=(TableNotFound, InvalidTableConfig, InvalidInput, NotMergeOnRead,
                                           ValueError),
                   conflict=(CompactionPending, ClusteringPending, CleanPending, WriteConflict),
                   busy=(ServiceRunning,))


if __name__ == "__main__":
    sys.exit(main())
