"""What the supervisor decides, carried out: through a `Store` (the writers' status and Events) and a
`Launcher` (a loser's driver stopped), so the same code serves the cluster (kube.Kube, the Kubernetes
launcher) and `weir run` (local.StateDir, the local launcher). The same status fields and Events either
way; supervision/kubernetes.py adds what only a cluster has (metrics, status writes retried on Conflict).

A status or Event that cannot be written is logged, never a failed scan, except the loser's decision:
`record` says False and the supervisor decides again at its next scan (the decision goes to status first).
Callbacks tell the caller what a decision or scan made due: `on_commit` (namespace, table) when a scan saw
a commit (the table's status and its services' triggers), `on_writer` (namespace, name) for both writers
of a decision. Must not decide anything (the supervisor does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from lakeoperator.builders.driver_pod import child_name
from lakeoperator.launch import Launcher
from lakeoperator.status import lost_conflict
from lakeoperator.store import Store
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
from lakeoperator.supervision.supervisor import Decision, TableReport

log = logging.getLogger(__name__)
Due = Callable[[str, str], None]   # (namespace, name)
Change = Callable[[Mapping[str, Any]], dict[str, Any] | None]   # a status -> the new one (None: unchanged)


class StoreSink:
    """The supervisor's `SupervisorSink` over a store and a launcher (see the module docstring)."""

    def __init__(self, store: Store, launcher: Launcher, *, grace_s: float, on_commit: Due | None = None,
                 on_writer: Due | None = None) -> None:
        self.store, self.launcher, self.grace_s = store, launcher, grace_s
        self.on_commit, self.on_writer = on_commit, on_writer
        self._current = CurrentInstants()
        self._commits = CommitsSeen()

    def _update(self, writer: str | None, change: Change) -> None:
        """Apply `change` to the writer's status (None: nothing to change): one read, one write."""
        where = split_writer(writer)
        body = self.store.get("LakeWriter", *where) if where else None
        if body is None:
            return
        new = change(body.get("status") or {})
        if new is not None:
            self.store.replace_status(body, new)

    def _event(self, writer: str | None, type_: str, reason: str, message: str) -> None:
        where = split_writer(writer)
        try:
            body = self.store.get("LakeWriter", *where) if where else None
        except Exception:  # advisory, like every Event
            return
        if body is not None:
            self.store.post_event(body, type_, reason, message)

    def record(self, decision: Decision) -> bool:
        for writer, entry in conflict_entries(decision):
            try:
                self._update(writer, partial(with_conflict, entry=entry))
            except Exception as exc:
                log.warning("could not record the conflict decision on %s: %s", writer, exc)
                if entry["role"] == "Lost":
                    return False   # the loser's status first: try again at the next scan
        return True

    def aborted(self, decision: Decision, applied: bool) -> None:
        if not applied:
            try:
                self._update(decision.loser_writer, partial(with_void_conflict, instant=decision.loser))
            except Exception as exc:
                log.warning("could not mark the conflict of %s void: %s", decision.loser, exc)
        for writer, type_, reason, message in conflict_events(decision, applied):
            self._event(writer, type_, reason, message)
        for writer in (decision.loser_writer, decision.winner_writer):
            if self.on_writer is not None and (where := split_writer(writer)) is not None:
                self.on_writer(*where)

    def stop_loser(self, decision: Decision) -> None:
        where = split_writer(decision.loser_writer)
        if where is None:
            return
        try:
            body = self.store.get("LakeWriter", *where)
            conflict = lost_conflict((body or {}).get("status"))
            if body is None or conflict is None or conflict.get("instant") != decision.loser:
                return
            name = child_name(str(conflict["submission"]))
            pod = self.launcher.get_pod(where[0], name)
            if pod is None or (pod.get("status") or {}).get("phase") not in (None, "Pending", "Running"):
                return
            self.launcher.delete_pod(where[0], name)
            self._event(decision.loser_writer, "Warning", "LoserStopped",
                        f"write {decision.loser} still ran {self.grace_s:g}s after its abort: its driver was "
                        "deleted")
        except Exception as exc:
            log.warning("could not stop the driver of %s: %s", decision.loser_writer, exc)

    def observed(self, report: TableReport) -> None:
        if self._commits.new_commit(report) and self.on_commit is not None:
            self.on_commit(*report.table.key)
        for writer, instant, info in self._current.changes(report):
            try:
                self._update(writer, partial(with_current_instant, instant=instant, info=info))
                self._current.shown(writer, instant)
            except Exception as exc:
                log.debug("could not report the current instant of %s: %s", writer, exc)


__all__ = ["StoreSink"]
