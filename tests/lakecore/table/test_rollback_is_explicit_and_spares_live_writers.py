"""Rolling back is explicit: a pending write whose writer is alive is refused (WriterLive) unless
forced; rolling back is a dry run unless asked; and a rollback re-checks that the instant is still in
the state the caller saw. Before: `Table.rollback(T)` of a live pending write deleted its files
under it, and a CLI rollback of a write that completed between `timeline` and `rollback` deleted the
completed commit without confirmation."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app
from lakecore.concurrency import begin_write, commit_write
from lakecore.errors import InvalidInstantState, WriterLive
from lakecore.services import UndoPlan
from lakecore.write import conform, route, write_file_group

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    t.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    return t


def in_flight(t: Table, ids: list[int]):
    txn = begin_write(t.storage, t.config, t.lock, "upsert")  # started now: alive by its start time
    data = pa.table({"id": ids, "v": ["x"] * len(ids)}, schema=SCHEMA)
    stats = [s for g in route(conform(data, t.config, "upsert").rows, t.config)
             for s in write_file_group(txn.context(), g)]
    return txn, stats


def ids(t: Table) -> list[int]:
    return sorted(r["id"] for r in Table.open(t.uri).read().to_pylist())


def test_a_live_writer_is_not_rolled_back_unless_forced(tmp_path):
    t = table(tmp_path)
    txn, stats = in_flight(t, [3])
    with pytest.raises(WriterLive, match=txn.instant.requested_time):
        t.maintenance.rollback(txn.instant.requested_time, dry_run=False)
    assert commit_write(txn, stats, lock=t.lock).is_completed  # it was left alone and commits
    assert ids(t) == [1, 2, 3]
    other, _ = in_flight(t, [4])
    t.maintenance.rollback(other.instant.requested_time, dry_run=False, force=True)
    assert t.timeline().find(other.instant.requested_time) is None


def test_rollback_is_a_dry_run_unless_asked(tmp_path):
    t = table(tmp_path)
    last = t.upsert(pa.table({"id": [9], "v": ["z"]}, schema=SCHEMA)).instant.requested_time
    plan = t.maintenance.rollback(last).plan
    assert isinstance(plan, UndoPlan) and plan.files
    assert ids(t) == [1, 2, 9] and all(os.path.exists(os.path.join(t.uri, f)) for f in plan.files)


def test_a_write_that_completed_since_the_caller_looked_is_not_rolled_back(tmp_path):
    t = table(tmp_path)
    txn, stats = in_flight(t, [7])
    seen = txn.instant.requested_time  # the caller saw it pending
    commit_write(txn, stats, lock=t.lock)  # ... and it completed meanwhile
    with pytest.raises(InvalidInstantState, match="completed now"):
        t.maintenance.rollback(seen, dry_run=False, force=True, expect="pending")
    assert ids(t) == [1, 2, 7]


def test_the_cli_names_a_completed_instant_and_needs_yes(tmp_path):
    t = table(tmp_path)
    last = t.upsert(pa.table({"id": [8], "v": ["y"]}, schema=SCHEMA)).instant.requested_time
    runner = CliRunner()
    shown = runner.invoke(app, ["table", "rollback", t.uri, last])
    assert shown.exit_code == 0 and f"completed instant {last}" in shown.output and "--yes" in shown.output
    assert ids(t) == [1, 2, 8]
    done = runner.invoke(app, ["table", "rollback", t.uri, last, "--yes", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["rollback"] and ids(t) == [1, 2]


def test_the_cli_refuses_a_live_pending_write(tmp_path):
    t = table(tmp_path)
    txn, _ = in_flight(t, [6])
    result = CliRunner().invoke(app, ["table", "rollback", t.uri, txn.instant.requested_time, "--yes"])
    assert result.exit_code == 1 and "alive" in result.output
    assert t.timeline().find(txn.instant.requested_time) is not None
