"""A writer killed with SIGKILL at any point leaves the table readable with exactly the data of the
completed instants; the next writer proceeds, and a rollback removes the dead write's files."""

import os
import random
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.concurrency import StorageLock
from lakecore.merge import merge
from lakecore.read.spec import merge_spec
from tests.lakecore.table.conftest import SCHEMA
from tests.lakecore.table.crash_writer import batch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
pytestmark = pytest.mark.crash


def child(*args):
    return subprocess.Popen([sys.executable, "-m", "tests.lakecore.table.crash_writer", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def expected(table: Table) -> dict:
    """Replay exactly the batches whose instants completed, in completion order."""
    every = (*table.archived_instants(), *table.timeline().completed)  # archived ones too
    done = [table.commit_metadata(i).extra["batch"] for i in every if i.action == "deltacommit"]
    schema = pa.schema([*SCHEMA, pa.field("_weir_op", pa.int8())])
    batches = [batch(n).append_column("_weir_op", pa.array([0] * 60, pa.int8())).cast(schema) for n in done]
    if not batches:
        return {}
    model = merge(batches, merge_spec(table.config), SCHEMA)
    return {r["id"]: r for r in model.to_pylist()}


def actual(table: Table) -> dict:
    return {r["id"]: r for r in table.read().to_pylist()}


def fresh(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=4)
    t.upsert(batch(0), extra={"batch": 0})
    return reopen(t.uri)


def reopen(uri: str) -> Table:
    # a writer SIGKILLed inside the critical section leaves the lock file behind: short expiry
    t = Table.open(uri)
    return Table.open(uri, lock=StorageLock(t.storage, expiry_s=2.0))


def data_files(uri: str) -> set:
    return {f for d, _, fs in os.walk(uri) if "/.weir" not in d for f in fs}


@pytest.mark.parametrize("point", ["before_inflight", "after_first_file", "mid_file", "before_complete",
                                   "after_complete"])
def test_sigkill_at_each_point_of_a_write(tmp_path, point):
    t = fresh(tmp_path)
    proc = child(t.uri, "point", point, "1")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -9, err
    again = reopen(t.uri)
    assert actual(again) == expected(again)
    landed = point == "after_complete"
    assert (1 in {again.commit_metadata(i).extra["batch"] for i in again.timeline().completed}) == landed
    for pending in again.timeline().pending:
        again.maintenance.rollback(pending.requested_time, dry_run=False, force=True)  # its writer was killed
    assert again.timeline().pending == ()
    again.upsert(batch(2), extra={"batch": 2})
    assert actual(again) == expected(again)
    live = {s.file_name for i in again.timeline().completed for s in again.commit_metadata(i).write_stats}
    assert data_files(t.uri) == live  # the dead write's files were deleted by the rollback


def test_sigkill_at_random_moments_of_a_write_loop(tmp_path):
    t = fresh(tmp_path)
    rng = random.Random(11)
    next_batch = 1
    # at least 6 kills; more (up to 14) while fewer than 4 writes landed: a child needs ~0.5-1 s to start
    # (far more on a loaded machine), so some kills land before its first commit; from the 7th on, the
    # kill waits for the child's first commit, then comes at a random moment after it
    for round_ in range(14):
        if round_ >= 6 and len(Table.open(t.uri).timeline().completed) > 3:
            break
        proc = child(t.uri, "loop", str(next_batch))
        first = ""
        if round_ >= 6:
            assert proc.stdout is not None
            first = proc.stdout.readline()  # its first write landed (or it died: "")
        time.sleep(rng.uniform(0.3, 1.5))
        proc.kill()
        out, _ = proc.communicate(timeout=30)
        next_batch += len((first + out).split()) + 1
        again = reopen(t.uri)
        assert actual(again) == expected(again)
        for pending in again.timeline().pending:
            # its writer was killed
            again.maintenance.rollback(pending.requested_time, dry_run=False, force=True)
    final = Table.open(t.uri)
    assert len(final.timeline().completed) > 3
    assert actual(final) == expected(final)
