"""Supervision: the operator watches every live write of its tables, stops the loser of a conflict from
outside, rolls back dead writers' instants, and reports what it sees (docs/supervision.md).

    supervisor.py   the scan loop and its decisions (lakecore.concurrency.conflicts.outside), what it watches
    status.py       what a decision or scan does to writers' status and Events (pure fragments)
    sink.py         those carried out through a store and a launcher (the cluster and `weir run` alike)
    kubernetes.py   the sink on a cluster: the operator's metrics, status writes retried on Conflict
"""

from lakeoperator.supervision.sink import StoreSink
from lakeoperator.supervision.status import (
    CommitsSeen,
    CurrentInstants,
    conflict_entries,
    conflict_events,
    split_writer,
    with_conflict,
    with_current_instant,
    with_void_conflict,
)
from lakeoperator.supervision.supervisor import (
    DECIDED_BY,
    Decision,
    Supervisor,
    SupervisorSink,
    TableReport,
    WatchedTable,
    watched_table,
    zookeeper_abort_flag,
)

__all__ = [
    "DECIDED_BY",
    "CommitsSeen",
    "CurrentInstants",
    "Decision",
    "StoreSink",
    "Supervisor",
    "SupervisorSink",
    "TableReport",
    "WatchedTable",
    "conflict_entries",
    "conflict_events",
    "split_writer",
    "watched_table",
    "with_conflict",
    "with_current_instant",
    "with_void_conflict",
    "zookeeper_abort_flag",
]
