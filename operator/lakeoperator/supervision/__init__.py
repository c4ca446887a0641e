"""Supervision: the operator watches every live write of its tables, stops the loser of a conflict from
outside, rolls back dead writers' instants, and reports what it sees (supervisor.py; docs/supervision.md).
"""

from lakeoperator.supervision.supervisor import (
    DECIDED_BY,
    CommitsSeen,
    CurrentInstants,
    Decision,
    Supervisor,
    SupervisorSink,
    TableReport,
    WatchedTable,
    conflict_entries,
    conflict_events,
    split_writer,
    watched_table,
    with_conflict,
    with_current_instant,
    with_void_conflict,
    zookeeper_abort_flag,
)

__all__ = [
    "DECIDED_BY",
    "CommitsSeen",
    "CurrentInstants",
    "Decision",
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
