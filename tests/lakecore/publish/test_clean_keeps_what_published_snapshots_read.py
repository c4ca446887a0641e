"""Clean never deletes a file a retained published snapshot reads: a snapshot published before a
compaction stays readable through Iceberg and Delta after a clean that Weir's own retention would let
delete its files; once the publisher expires that snapshot (keep=1), clean reclaims them."""

from __future__ import annotations

import pyarrow as pa

from lakecore import Table
from lakecore.services import CleanPolicy
from lakecore.services.published import pinned_points
from tests.lakecore.publish import readers

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def test_a_published_snapshot_keeps_its_files_until_it_expires(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    t.upsert(rows(list(range(20)), "a"))
    t.upsert(rows(list(range(0, 20, 2)), "b"))
    published = t.read()
    first = {target: t.publish(target).snapshot for target in ("iceberg", "delta")}
    t.maintenance.compact()
    for tag in ("c", "d"):
        t.upsert(rows([1, 3], tag))
        t.maintenance.compact()
    done = t.maintenance.clean(CleanPolicy("keep_latest_commits", 1), dry_run=False)
    assert done.done  # it deleted files of the slices between the compactions...
    for reader in ("iceberg", "delta"):  # ...but none the published snapshot reads
        got = readers.READERS[reader](t.uri)
        want = readers.expected(published, readers.TARGET_OF[reader])
        readers.assert_same(got, want, ["id"], reader=reader)
    assert first["iceberg"].completion in pinned_points(t.storage)

    for target in ("iceberg", "delta"):
        t.publish(target, keep=1)
    assert first["iceberg"].completion not in pinned_points(t.storage)
    plan = t.maintenance.clean(CleanPolicy("keep_latest_commits", 1), dry_run=True).plan
    assert plan is not None and plan.files  # the expired snapshot's files are garbage now
    t.maintenance.clean(CleanPolicy("keep_latest_commits", 1), dry_run=False)
    for reader in ("iceberg", "delta"):
        got = readers.READERS[reader](t.uri)
        readers.assert_same(got, readers.expected(t.read(), readers.TARGET_OF[reader]), ["id"], reader=reader)
