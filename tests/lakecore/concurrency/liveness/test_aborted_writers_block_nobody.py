"""A writer that aborted, or whose instant a rollback claimed, is dead at once for early conflict
detection and for the lazy cleanup — it never blocks other writers for the rest of its heartbeat
timeout. Before: an aborting writer deleted its heartbeat file, which reads as "not beaten yet", so
it counted as live from its start for the whole timeout, and a claimed instant counted as live while
its heartbeat was fresh (under 8 contending writers: 100-190 needless early aborts per 400 ops)."""

from __future__ import annotations

import pyarrow as pa
import pytest

import lakecore.concurrency.rollback as rollback_module
import lakecore.table.writer as writer_module
from lakecore import AfterCommitOptions, ConflictOptions, Table, WriteJob, WriterOptions
from lakecore.concurrency import rollback_failed_writes, rollback_write
from lakecore.concurrency.conflicts.early import EarlyDetection
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig, is_aborted
from lakecore.concurrency.rollback import resume_rollbacks
from lakecore.errors import LockTimeout
from lakecore.write import conform, route, write_file_group
from tests.lakecore.concurrency.conflicts.test_occ_conflicts import SCHEMA, keys_in_bucket

SLOW = HeartbeatConfig(interval_s=10.0, tolerable_misses=3)  # 30 s: far longer than this test
OPTIONS = WriterOptions(heartbeat=SLOW, conflicts=ConflictOptions(early_detection=EarlyDetection("direct")),
                        after_commit=AfterCommitOptions(archival=None))


def rows(ids, tag):
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": [1] * len(ids), "v": [tag] * len(ids)})


def older_writer_with_files(t: Table, ids) -> WriteJob:
    job = WriteJob.start(t.storage, t.config, t.lock, "upsert", OPTIONS)
    for g in route(conform(rows(ids, "older"), t.config, "upsert").rows, t.config):
        write_file_group(job.context(), g)
    return job


def test_a_writer_whose_abort_could_not_roll_back_blocks_nobody(tmp_path, monkeypatch):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", options=OPTIONS)
    job = older_writer_with_files(t, keys_in_bucket(1, 3))

    def lock_busy(*a, **kw):
        raise LockTimeout("the table lock is busy")

    monkeypatch.setattr(writer_module, "rollback_write", lock_busy)  # its rollback fails: it stays pending
    job.abort(RuntimeError("a task failed"))
    monkeypatch.undo()
    older = job.instant.requested_time
    assert [i.requested_time for i in t.timeline().pending] == [older] and is_aborted(t.storage, older)
    done = t.upsert(rows(keys_in_bucket(1, 3), "younger"))  # same file group: no early conflict
    assert done.instant.is_completed
    assert {r["v"] for r in t.read().to_pylist()} == {"younger"}
    assert older not in {i.requested_time for i in t.timeline().pending}  # the lazy cleanup took it


def test_a_claimed_writer_blocks_nobody_while_its_rollback_is_unfinished(tmp_path, monkeypatch):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", options=OPTIONS)
    job = older_writer_with_files(t, keys_in_bucket(2, 3))  # alive: its heartbeat beats

    class Died(Exception):
        pass

    def die(*a, **kw):
        raise Died

    monkeypatch.setattr(rollback_module, "_execute", die)  # the rollback dies right after claiming
    with pytest.raises(Died):
        rollback_write(t.storage, t.lock, job.instant)
    monkeypatch.undo()
    done = Table.open(t.uri, options=OPTIONS).upsert(rows(keys_in_bucket(2, 3), "younger"))
    assert done.instant.is_completed
    job.heartbeat.stop()
    assert rollback_failed_writes(t.storage, t.lock, SLOW) == []  # the claimed rollback may still run
    assert resume_rollbacks(t.storage, t.lock, 0) == [job.instant.requested_time]
    assert {r["v"] for r in t.read().to_pylist()} == {"younger"}


def test_clean_prunes_proofs_of_death_a_week_after_their_write(tmp_path):
    from lakecore.services import CleanPolicy, run_clean
    from lakecore.timeline import now_ms

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", options=OPTIONS)
    job = older_writer_with_files(t, keys_in_bucket(3, 2))
    job.abort(RuntimeError("a task failed"))  # rolled back; its proof of death stays
    for k in range(3):
        t.upsert(rows(keys_in_bucket(3, 2), f"v{k}"))
        t.maintenance.compact()  # base files supersede each other: the clean has work
    policy = CleanPolicy("keep_latest_file_versions", 1)
    dead = job.instant.requested_time
    assert run_clean(t.storage, t.config, t.lock, policy, dry_run=False) is not None
    assert is_aborted(t.storage, dead)  # too recent to prune
    t.upsert(rows(keys_in_bucket(3, 2), "later"))
    t.maintenance.compact()
    week_later = now_ms() + 8 * 24 * 3600 * 1000
    assert run_clean(t.storage, t.config, t.lock, policy, dry_run=False, clock=lambda: week_later) is not None
    assert not is_aborted(t.storage, dead)
