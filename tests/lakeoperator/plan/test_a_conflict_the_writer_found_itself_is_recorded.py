"""A writer whose job lost a conflict by itself (at its commit, or by its own early check) gets a
status.lastConflict like one the supervisor decided: Lost, its instant, the other one, the file groups,
decidedBy `writer`. The job says so in its outcome line, which is its termination message; the
conflict here is a real one between two optimistic writes of one file group."""

from __future__ import annotations

import json
from dataclasses import replace

import pyarrow as pa

from lakecore import Table
from lakecore.concurrency import begin_write, commit_write
from lakecore.errors import WriteConflict
from lakecore.write import conform, route, write_file_group
from lakeoperator.plan.writer import SELF_DETECTED, DriverObservation, WriterPhase, plan_writer
from lakeoperator.status import lost_conflict, writer_status
from sparkjobs.batch_write import describe_conflict
from sparkjobs.contract import EXIT_CONFLICT
from tests.lakeoperator.plan.writer_cases import NOW, REF, SID, ended, writer
from tests.lakeoperator.test_statuses_fit_the_crd_schemas import fits

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def lost_write(tmp_path) -> tuple[WriteConflict, str, str]:
    """Two writes of the same rows begun together: the second to commit loses (ours, theirs)."""
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=1)
    rows = conform(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA), table.config, "upsert").rows
    txns = [begin_write(table.storage, table.config, table.lock, "upsert") for _ in range(2)]
    stats = [[s for g in route(rows, table.config) for s in write_file_group(t.context(), g)] for t in txns]
    commit_write(txns[0], stats[0], lock=table.lock)
    try:
        commit_write(txns[1], stats[1], lock=table.lock)
    except WriteConflict as exc:
        return exc, txns[1].instant.requested_time, txns[0].instant.requested_time
    raise AssertionError("the second write committed")


def test_the_jobs_own_conflict_becomes_last_conflict(tmp_path) -> None:
    exc, ours, theirs = lost_write(tmp_path)
    line = json.dumps({"outcome": "conflict", **describe_conflict(exc)})  # the job's message
    observed = replace(ended(EXIT_CONFLICT), driver=replace(ended(EXIT_CONFLICT).driver, message=line))
    plan = plan_writer(REF, writer(), observed, NOW)
    assert plan.phase == WriterPhase.BACKING_OFF and plan.finished is not None
    # what `weir run` prints and `kubectl describe` shows names the winner (it said only "exit code 3")
    [(_, group)] = {g for c in exc.conflicts for g in c.file_groups}
    assert f"the driver ended with exit code 3: its write {ours} lost a conflict to write {theirs} on file " \
           f"group {group}; restarting at " in plan.message, plan.message
    status = writer_status(REF, plan, {"submissionId": SID}, NOW)
    conflict = status["lastConflict"]
    assert conflict["role"] == "Lost" and conflict["instant"] == ours and conflict["other"] == theirs
    assert conflict["decidedBy"] == SELF_DETECTED and conflict["submission"] == SID
    assert conflict["fileGroups"] == sorted({f"{p}/{f}" if p else f for c in exc.conflicts
                                              for p, f in c.file_groups})
    fits("lakewriters", status)
    assert lost_conflict(status) is not None  # as the supervisor's: the restart waits for a live winner

    again = writer_status(REF, plan, status, NOW)  # the same pass again: the same record
    assert again["lastConflict"] == conflict


def test_a_conflict_the_supervisor_decided_is_not_overwritten() -> None:
    decided = {"role": "Lost", "instant": "20261123120000000", "other": "20261123115959000",
               "decidedBy": "weir-operator", "submission": SID}
    message = json.dumps({"outcome": "conflict", "early": True, "instant": "20261123120000000",
                          "other": "20261123115959000", "aborted_by": "weir-operator"})
    observed = replace(ended(EXIT_CONFLICT, lost_conflict=True),
                       driver=DriverObservation(SID, "Failed", exit_code=EXIT_CONFLICT, message=message))
    plan = plan_writer(REF, writer(), observed, NOW)
    assert plan.conflict is None
    status = writer_status(REF, plan, {"submissionId": SID, "lastConflict": decided}, NOW)
    assert status["lastConflict"] == decided


def test_other_endings_and_unreadable_messages_record_no_conflict() -> None:
    for code, message in ((1, json.dumps({"outcome": "failed", "error": "x"})), (EXIT_CONFLICT, "not json"),
                          (EXIT_CONFLICT, None), (0, json.dumps({"outcome": "committed", "instant": "1"}))):
        observed = replace(ended(code), driver=replace(ended(code).driver, message=message))
        plan = plan_writer(REF, writer(), observed, NOW)
        assert plan.conflict is None
        assert "lastConflict" not in writer_status(REF, plan, None, NOW)
