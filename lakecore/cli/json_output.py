"""`weir table ... --json` for machines: one JSON document on stdout per command (an error: one JSON
object on stderr), one method per result kind (see output.py). The keys are a contract: scripts and
the operator's tests read them."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakecore.cli.consoles import emit_json
from lakecore.cli.errors import CliError
from lakecore.cli.io import write_output
from lakecore.config import LockSpec
from lakecore.services import ArchivalPlan, ClusteringPlan, CompactionPlan, Savepoint, UndoPlan
from lakecore.services.clean_plan import CleanPlan
from lakecore.services.repair import Problem, RepairReport
from lakecore.table import MaintenanceResult, Table, WriteResult

if TYPE_CHECKING:
    from lakecore.publish import PublishResult


class JsonOutput:
    """Machine-readable output."""

    data_format: str | None = "json"  # `read` writes its rows as JSON lines unless told otherwise

    def error(self, error: CliError) -> None:
        sys.stderr.write(json.dumps(error.to_json()) + "\n")

    def confirm(self, question: str) -> bool:
        return False  # never asks: a script says --yes

    def created(self, table: Table) -> None:
        emit_json(table.config.to_json())

    def lock_changed(self, table: Table, before: LockSpec, after: LockSpec) -> None:
        emit_json({"before": before.to_json(), "after": after.to_json()})

    def compression_changed(self, table: Table, before: str, after: str) -> None:
        emit_json({"before": before, "after": after})

    def written(self, operation: str, result: WriteResult, added: Sequence[pa.Field] = ()) -> None:
        counts = result.counts
        emit_json({"instant": result.instant.requested_time, "completed": result.instant.completion_time,
                   "records": result.records, "rows_written": counts.written,
                   "delete_keys": counts.delete_keys, "file_groups": result.file_groups,
                   "added_columns": [{"name": f.name, "type": str(f.type)} for f in added]})

    def rows(self, table: Table, data: pa.RecordBatchReader, limit: int) -> None:
        write_output(data, "json", None)

    def rows_saved(self, rows: int, path: str) -> None:
        emit_json({"rows": rows, "output": path})

    def timeline(self, table: Table, rows: list[dict[str, Any]], archived: int,
                 archived_listed: bool) -> None:
        emit_json(rows)

    def timeline_picture(self, path: str) -> None:
        emit_json({"html": path})

    def description(self, table: Table, info: dict[str, Any]) -> None:
        emit_json(info)

    def compaction(self, table: Table, result: MaintenanceResult) -> None:
        done = result.instant
        if done is not None:
            emit_json({"compaction": done.requested_time, "completed": done.completion_time,
                       "file_groups": len(table.commit_metadata(done).file_groups)})
        elif isinstance(result.plan, CompactionPlan):
            emit_json({"dry_run": True, "operations": [
                {"partition": o.partition, "file_id": o.file_id, "base": o.base_file,
                 "logs": len(o.log_files)} for o in result.plan.operations]})
        else:
            emit_json({"compacted": None})

    def clustering(self, table: Table, result: MaintenanceResult, sort_columns: Sequence[str]) -> None:
        done = result.instant
        if done is not None:
            emit_json({"clustering": done.requested_time, "completed": done.completion_time,
                       "file_groups": len(table.commit_metadata(done).file_groups),
                       "sort_columns": list(sort_columns)})
        elif isinstance(result.plan, ClusteringPlan):
            emit_json({"dry_run": True, "strategy": result.plan.strategy.to_json(), "operations": [
                {"partition": o.partition, "file_id": o.file_id, "base_instant": o.base_instant,
                 "files": len(o.paths()), "bytes": o.bytes} for o in result.plan.operations]})
        else:
            emit_json({"clustered": None})

    def clean(self, table: Table, result: MaintenanceResult) -> None:
        if result.instant is not None:
            extra = table.commit_metadata(result.instant).extra
            emit_json({"clean": result.instant.requested_time, "deleted": extra.get("deleted", []),
                       "rolled_back": extra.get("rolled_back", [])})
        elif isinstance(result.plan, CleanPlan) and not result.dry_run:   # it only rolled back
            emit_json({"deleted": [], "rolled_back": list(result.plan.rollbacks)})
        elif isinstance(result.plan, CleanPlan):
            emit_json({"dry_run": True, "files": result.plan.files, "rollbacks": list(result.plan.rollbacks)})
        else:
            emit_json({"deleted": []})

    def savepoint(self, instant: str, result: MaintenanceResult) -> None:
        if result.instant is not None:
            emit_json({"savepoint": result.instant.requested_time, "savepointed": instant})
        elif isinstance(result.plan, Savepoint):
            emit_json({"dry_run": True, "savepointed": instant, "files": list(result.plan.files)})

    def savepoints(self, listed: Sequence[Savepoint]) -> None:
        emit_json([{"savepoint": s.instant_time, "savepointed": s.savepointed, "files": len(s.files),
                    "comment": s.comment} for s in listed])

    def savepoint_deleted(self, savepoint: str, result: MaintenanceResult) -> None:
        assert result.instant is not None
        emit_json({"deleted_savepoint": savepoint, "instant": result.instant.requested_time})

    def restore(self, savepoint: str, result: MaintenanceResult) -> None:
        if result.instant is not None:
            emit_json({"restore": result.instant.requested_time, "published": list(result.published)})
        elif isinstance(result.plan, UndoPlan):
            emit_json({"dry_run": True, "undo": list(result.plan.undone), "files": list(result.plan.files),
                       "published": list(result.published)})
        else:
            emit_json({"restored": None})

    def rollback(self, instant: str, result: MaintenanceResult, state: str, what: str) -> None:
        done = result.instant
        if done is not None:
            emit_json({"rollback": done.requested_time, "completed": done.completion_time,
                       "published": list(result.published)})
        elif isinstance(result.plan, UndoPlan):
            emit_json({"dry_run": True, "state": state, "undo": list(result.plan.undone),
                       "files": list(result.plan.files), "live": result.plan.live,
                       "published": list(result.published)})

    def archival(self, result: MaintenanceResult) -> None:
        plan = result.plan
        if result.archived is not None:
            emit_json(result.archived.to_json())
        elif isinstance(plan, ArchivalPlan) and plan.instants:
            emit_json({"dry_run": True, **plan.to_json()})
        else:
            why = plan.stopped_by if isinstance(plan, ArchivalPlan) else None
            emit_json({"archived": 0, "stopped_by": why})

    def check(self, uri: str, problems: Sequence[Problem], code: int) -> None:
        emit_json({"ok": not problems, "exit_code": code, "problems": [p.to_json() for p in problems]})

    def repair(self, report: RepairReport, dry_run: bool) -> None:
        emit_json(report.to_json())

    def published(self, result: PublishResult) -> None:
        emit_json(result.to_json())
