"""Once its completed instant exists, a write returns its WriteResult: what fails after the commit
point (an inline service that cannot get the lock, cleanup of dead writers) is logged and listed in
`WriteResult.warnings`, never raised. Before: an inline compaction hitting LockTimeout made
`upsert()` raise although the deltacommit had completed, and callers re-ran a committed write."""

from __future__ import annotations

import logging

import pyarrow as pa

import lakecore.table.writer as writer_module
from lakecore import AfterCommitOptions, Table, WriterOptions
from lakecore.concurrency import StorageLock
from lakecore.services.triggers import Trigger

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def test_an_inline_compaction_that_times_out_on_the_lock_does_not_fail_the_write(tmp_path, monkeypatch,
                                                                                  caplog):
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=2)
    options = WriterOptions(after_commit=AfterCommitOptions(compaction=Trigger("commits", 1), archival=None))
    t = Table.open(uri, options=options)
    t.lock = StorageLock(t.storage, default_timeout=0.3)
    other_process = StorageLock(t.storage)
    real = writer_module.commit_write

    def then_someone_takes_the_lock(*a, **kw):
        done = real(*a, **kw)
        other_process.acquire()  # right after our commit point, another process holds the table lock
        return done

    monkeypatch.setattr(writer_module, "commit_write", then_someone_takes_the_lock)
    with caplog.at_level(logging.WARNING, logger="lakecore.table.writer"):
        result = t.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    other_process.release()
    assert result.instant.is_completed
    assert result.warnings and "inline compaction" in result.warnings[0]
    assert "LockTimeout" in result.warnings[0]
    assert any("inline compaction" in r.getMessage() for r in caplog.records)
    fresh = Table.open(uri)
    assert fresh.timeline().find(result.instant.requested_time).is_completed
    assert sorted(r["id"] for r in fresh.read().to_pylist()) == [1, 2]


def test_an_error_after_the_completed_instant_exists_still_returns_the_result(tmp_path, monkeypatch):
    import lakecore.concurrency.transaction as transaction

    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=SCHEMA, record_key="id", buckets=2,
                     options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))
    real = transaction.TimelineStore.complete

    def completes_then_the_reply_is_lost(self, *a, **kw):
        real(self, *a, **kw)
        raise OSError("connection reset after the PUT")  # as an object store may answer

    monkeypatch.setattr(transaction.TimelineStore, "complete", completes_then_the_reply_is_lost)
    result = t.upsert(pa.table({"id": [3], "v": ["c"]}, schema=SCHEMA))
    monkeypatch.undo()
    assert result.instant.is_completed and "OSError" in result.warnings[0]
    assert [r["id"] for r in Table.open(uri).read().to_pylist()] == [3]
