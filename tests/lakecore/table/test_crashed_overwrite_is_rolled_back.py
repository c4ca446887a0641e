"""An overwrite killed (SIGKILL) before its replacecommit completes leaves the table reading exactly as
before; it is a pending write like any other: rolled back lazily once its heartbeat expired (or by
hand: at once on the machine it ran on, where its process is known gone), its files deleted, and it
never passes for a pending clustering."""

import json
import subprocess

import pytest

from lakecore.concurrency import rollback_failed_writes
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig, writer_path
from lakecore.errors import WriterLive
from lakecore.services import pending_clusterings
from lakecore.timeline import TimelineStore, now_ms
from tests.lakecore.table.crash_writer import batch
from tests.lakecore.table.test_crash_leaves_table_readable import actual, child, data_files, fresh, reopen

pytestmark = pytest.mark.crash
HEARTBEAT = HeartbeatConfig(interval_s=0.2, tolerable_misses=2)  # the child's


def killed_overwrite(tmp_path, point):
    t = fresh(tmp_path)
    before, files = actual(t), data_files(t.uri)
    proc = child(t.uri, "overwrite", point, "1")
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode == -9, err
    return reopen(t.uri), before, files


@pytest.mark.parametrize("point", ["after_first_file", "before_complete"])
def test_a_killed_overwrite_changes_nothing_and_is_rolled_back_lazily(tmp_path, point):
    t, before, files = killed_overwrite(tmp_path, point)
    assert actual(t) == before
    (pending,) = t.timeline().pending
    assert pending.action == "replacecommit"
    assert pending_clusterings(TimelineStore(t.storage), t.timeline()) == []
    # a clock past the heartbeat's expiry instead of waiting for it
    done = rollback_failed_writes(t.storage, t.lock, HEARTBEAT, clock=lambda: now_ms() + 60_000)
    assert done == [pending.requested_time]
    assert t.timeline().pending == ()
    assert data_files(t.uri) == files  # what the dead overwrite wrote is gone
    assert actual(t) == before
    t.insert_overwrite_table(batch(2), extra={"batch": 2})
    assert actual(t) == {r["id"]: r for r in batch(2).to_pylist()}


def test_a_killed_overwrite_is_not_rolled_back_while_its_heartbeat_is_fresh_and_can_be_by_hand(tmp_path):
    t, before, files = killed_overwrite(tmp_path, "before_complete")
    (pending,) = t.timeline().pending
    fresh_enough = HeartbeatConfig(interval_s=60, tolerable_misses=10)
    assert rollback_failed_writes(t.storage, t.lock, fresh_enough) == []
    assert t.timeline().pending == (pending,)
    # seen from another machine (the writer's record names another host), an overwrite is a write like
    # any other: its fresh heartbeat protects it
    record = writer_path(pending.requested_time)
    here = json.loads(t.storage.read(record))
    t.storage.write(record, json.dumps({**here, "host": "elsewhere"}).encode())
    with pytest.raises(WriterLive):
        t.maintenance.rollback(pending.requested_time, dry_run=False)
    t.storage.write(record, json.dumps(here).encode())
    # on this machine its process is known gone: no need to force it
    t.maintenance.rollback(pending.requested_time, dry_run=False)
    assert t.timeline().pending == ()
    assert data_files(t.uri) == files and actual(t) == before
