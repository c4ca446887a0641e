"""The operator's Prometheus metrics: what it submitted, restarted and reconciled, and how long that took.

Owns the metric names and labels (the Grafana dashboard and alerts refer to them) and one registry per
operator instance, so tests and two operators in one process never share counters. Must not decide
anything: handlers and launchers call `record_*`; the HTTP endpoint that serves them lives with the
operator's runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

KINDS = ("LakeTable", "LakeWriter", "TableService")
# Reconciles are mostly API round trips: sub-second buckets, with a tail for slow API servers.
RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
STOP_BUCKETS = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0)


@dataclass
class OperatorMetrics:
    """Every metric the operator exports, registered in `registry`."""

    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        r = self.registry
        self.submissions = Counter("weir_submissions", "Spark driver pods submitted",
                                   ["kind", "namespace", "table"], registry=r)
        self.restarts = Counter("weir_restarts", "Writer or service restarts, by the cause of the attempt "
                                "that ended (failure, conflict, infrastructure, ...)",
                                ["kind", "namespace", "table", "cause"], registry=r)
        self.reconciles = Histogram("weir_reconcile_duration_seconds", "Time one reconcile of a resource "
                                    "took, by kind and outcome", ["kind", "outcome"],
                                    buckets=RECONCILE_BUCKETS, registry=r)
        self.phases = Gauge("weir_resources", "Resources by kind and phase", ["kind", "phase"], registry=r)
        self.conflicts = Counter("weir_conflicts", "Write conflicts the supervisor decided, by table and "
                                 "writer pair (loser, winner: namespace/name, or '-' for a writer the "
                                 "operator does not run)", ["namespace", "table", "loser", "winner"],
                                 registry=r)
        self.conflict_bytes = Counter("weir_conflict_lost_bytes", "Bytes the losing writes had written when "
                                      "the supervisor stopped them", ["namespace", "table"], registry=r)
        self.conflict_stop = Histogram("weir_conflict_stop_seconds", "From the conflicting marker to the "
                                       "losing driver seen ended", ["namespace", "table"],
                                       buckets=STOP_BUCKETS, registry=r)
        self.table_scans = Counter("weir_supervision_scans", "Scans of a table's live writes by this "
                                   "replica's supervisor (only the leader's scans)", registry=r)
        self.live_writes = Gauge("weir_live_writes", "Live writes the supervisor sees per table",
                                 ["namespace", "table"], registry=r)
        self.heartbeat_age = Gauge("weir_writer_heartbeat_age_seconds", "Age of a live writer's last "
                                   "heartbeat at the supervisor's last scan", ["namespace", "writer"],
                                   registry=r)
        self.leader = Gauge("weir_leader", "1 while this replica holds the leader Lease and reconciles",
                            registry=r)

    def record_submission(self, kind: str, namespace: str, table: str) -> None:
        self.submissions.labels(kind, namespace, table).inc()

    def record_restart(self, kind: str, namespace: str, table: str, cause: str) -> None:
        self.restarts.labels(kind, namespace, table, cause).inc()

    def record_reconcile(self, kind: str, outcome: str, seconds: float) -> None:
        self.reconciles.labels(kind, outcome).observe(max(0.0, seconds))

    def set_phases(self, kind: str, counts: Mapping[str, int], known: Iterable[str] = ()) -> None:
        """Resources of `kind` per phase, now; phases in `known` that have none read 0 (not stale)."""
        for phase in {*known, *counts}:
            self.phases.labels(kind, phase).set(counts.get(phase, 0))

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes."""
        return generate_latest(self.registry)
