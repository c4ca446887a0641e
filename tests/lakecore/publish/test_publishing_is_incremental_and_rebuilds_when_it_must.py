"""A publish plans only the file groups whose slices changed since the snapshot the target shows (so
its cost follows the instant, not the table); a publish of an instant already shown writes nothing;
when the shown instant left the active timeline (archival), or an undo (rollback of a completed write,
restore) rewrote history, the next publish is a full rebuild, and readers see Table.read() again."""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.publish import delta, iceberg
from lakecore.services import ArchivalPolicy
from tests.lakecore.publish import readers

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
TARGETS = ("iceberg", "delta")


def rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def agree(t: Table) -> None:
    for reader in ("iceberg", "delta"):
        readers.assert_same(readers.READERS[reader](t.uri), readers.expected(t.read(), reader), ["id"],
                            reader=reader)


def test_a_publish_plans_only_the_groups_the_instants_changed(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=8)
    t.bulk_insert(rows(list(range(200)), "a"))
    assert {r.groups for r in map(t.publish, TARGETS)} == {8}
    t.upsert(rows([7], "b"))  # one file group: a log beside its base, which hides one row
    for target in TARGETS:
        r = t.publish(target)
        assert not r.full and r.groups == 1 and r.files == 2 and r.hidden == 1, r
    again = [t.publish(target) for target in TARGETS]
    assert all(r.up_to_date for r in again)
    assert iceberg.load(t.storage).version == 2 and delta.load(t.storage).version == 1  # nothing written
    agree(t)


def test_archival_past_the_shown_instant_means_a_full_rebuild(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    t.upsert(rows(list(range(20)), "a"))
    for target in TARGETS:
        t.publish(target)
    for i in range(5):
        t.upsert(rows([i], f"u{i}"))
    assert t.maintenance.archive(ArchivalPolicy(min_instants=2, max_instants=3, fanout=2)).done
    assert all(t.publish(target).full for target in TARGETS)
    agree(t)


@pytest.mark.parametrize("undo", ["rollback", "restore"])
def test_an_undo_means_a_full_rebuild_and_a_new_published_history(tmp_path, undo):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    first = t.upsert(rows(list(range(20)), "a")).instant
    if undo == "restore":
        t.maintenance.savepoint(first.requested_time)
    for target in TARGETS:
        t.publish(target)
    last = t.upsert(rows([1, 2, 30], "b")).instant
    for target in TARGETS:
        t.publish(target)
    if undo == "rollback":
        t.maintenance.rollback(last.requested_time, dry_run=False)
    else:
        t.maintenance.restore(first.requested_time, dry_run=False)
    results = [t.publish(target) for target in TARGETS]
    assert all(r.full for r in results)
    agree(t)
    assert len(iceberg.load(t.storage).snapshots) == 1  # older snapshots showed undone rows


def test_a_copied_table_publishes_afresh_and_leaves_the_original_alone(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    t.upsert(rows(list(range(20)), "a"))
    t.publish("iceberg")
    t.upsert(rows([1, 2], "b"))
    t.publish("iceberg")
    shutil.copytree(tmp_path / "t", tmp_path / "copy")  # Iceberg metadata names absolute paths
    copy = Table.open(str(tmp_path / "copy"))
    copy.upsert(rows([3], "c"))
    assert copy.publish("iceberg", keep=1).full
    for table, name in ((copy, "copy"), (t, "original")):
        want = readers.expected(table.read(), "iceberg")
        readers.assert_same(readers.iceberg(table.uri), want, ["id"], reader=name)


def test_a_column_added_without_a_write_is_published_again(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    t.upsert(rows(list(range(5)), "a"))
    for target in TARGETS:
        t.publish(target)
    t.add_columns([pa.field("extra", pa.int32())])  # no instant: table.json alone
    results = [t.publish(target) for target in TARGETS]
    assert not any(r.up_to_date or r.full for r in results) and {r.groups for r in results} == {0}
    agree(t)
    assert "extra" in readers.iceberg(t.uri).column_names
