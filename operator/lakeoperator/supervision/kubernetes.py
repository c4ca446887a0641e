"""The supervisor's sink on a cluster: `StoreSink` over the API (kube.Kube and the Kubernetes launcher)
plus what only the operator on a cluster has: its Prometheus metrics (conflicts decided, the bytes their
losers had written, table scans, live writes, heartbeat ages) and status writes retried when the writer
changed since it was read (a Conflict: read again, apply the change again).
"""

from __future__ import annotations

from typing import Any

from lakeoperator.kube import Conflict
from lakeoperator.metrics import OperatorMetrics
from lakeoperator.supervision.sink import Change, StoreSink
from lakeoperator.supervision.status import split_writer
from lakeoperator.supervision.supervisor import Decision, TableReport


class KubeSink(StoreSink):
    STATUS_TRIES = 5

    def __init__(self, *args: Any, metrics: OperatorMetrics, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.metrics = metrics

    def _update(self, writer: str | None, change: Change) -> None:
        for _ in range(self.STATUS_TRIES):
            try:
                super()._update(writer, change)
                return
            except Conflict:
                continue

    def aborted(self, decision: Decision, applied: bool) -> None:
        if applied:
            table = decision.table
            self.metrics.conflicts.labels(table.namespace, table.name, decision.loser_writer or "-",
                                          decision.winner_writer or "-").inc()
            self.metrics.conflict_bytes.labels(table.namespace, table.name).inc(decision.loser_bytes)
        super().aborted(decision, applied)

    def observed(self, report: TableReport) -> None:
        table = report.table
        self.metrics.table_scans.inc()
        self.metrics.live_writes.labels(table.namespace, table.name).set(len(report.writes))
        for w in report.writes:
            if (where := split_writer(report.writers.get(w.instant))) is not None:
                self.metrics.heartbeat_age.labels(*where).set(
                    max(0.0, (report.scanned_at_ms - w.last_sign_ms) / 1000))
        super().observed(report)


__all__ = ["KubeSink"]
