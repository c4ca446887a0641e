"""An incremental Iceberg publish costs what the instant changed: a write that only appends log files
to file groups keeps every manifest of the snapshot before as it is (nothing of it is read or written
again) and adds one manifest of its new entries per content; a compaction (a slice replaced) rewrites
the manifests that listed its group, appended ones included; once appended manifests pile up they
are folded back into their buckets, each data file keeping its newest delete file only (and its
partition's from the last full rebuild). Readers see Table.read() after every step."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from lakecore import Table
from lakecore.publish.iceberg import FOLD_AFTER
from tests.lakecore.publish import readers

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": ids, "v": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def manifests(base: str) -> list[tuple[str, int]]:
    """(path, content) of the current snapshot's manifests."""
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(readers.iceberg_metadata(base))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    return [(m.manifest_path, int(m.content)) for m in snapshot.manifests(table.io)]


def agree(t: Table) -> None:
    readers.assert_same(readers.iceberg(t.uri), readers.expected(t.read(), "iceberg"), ["id"],
                        reader="iceberg")


def test_appending_logs_keeps_every_manifest_and_adds_one_per_content(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=8)
    t.bulk_insert(rows(list(range(400)), "a"))
    t.upsert(rows(list(range(0, 400, 3)), "b"))  # every group: a log whose rows hide base rows
    assert t.publish("iceberg").full
    before = manifests(t.uri)
    t.upsert(rows([5, 6, 7, 500], "c"))  # a few groups: one more log each
    result = t.publish("iceberg")
    assert not result.full and 1 <= result.groups <= 4
    after = manifests(t.uri)
    kept = set(before) & set(after)
    assert kept == set(before), "a manifest of the previous snapshot was rewritten"
    assert sorted(c for _, c in set(after) - kept) == [0, 1]  # one appended data, one deletes manifest
    agree(t)


def test_a_log_whose_rows_are_all_superseded_stays_hidden(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    t.bulk_insert(rows(list(range(20)), "a"))
    t.upsert(rows([1, 2], "b"))
    t.publish("iceberg")
    t.upsert(rows([1, 2], "c"))  # the first log now shows no row
    assert not t.publish("iceberg").full
    agree(t)


def test_a_compaction_after_appends_drops_the_old_entries_everywhere(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=4)
    t.bulk_insert(rows(list(range(100)), "a"))
    t.publish("iceberg")
    for i in range(3):
        t.upsert(rows([i, 50 + i, 200 + i], f"u{i}"))
        assert not t.publish("iceberg").full
        agree(t)
    assert t.maintenance.compact().done
    assert not t.publish("iceberg").full
    agree(t)
    t.upsert(rows([1, 300], "z"))
    t.publish("iceberg")
    agree(t)


def test_appended_manifests_are_folded_into_their_buckets(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    t.bulk_insert(rows(list(range(40)), "a"))
    t.publish("iceberg")
    for i in range(FOLD_AFTER + 1):
        t.upsert(rows([i % 5, 100 + i], f"u{i}"))  # the same keys again and again: delete files pile up
        assert not t.publish("iceberg").full
        agree(t)
    folded = manifests(t.uri)
    assert not [p for p, _ in folded if "-a-" in p], "appended manifests were not folded"
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(readers.iceberg_metadata(t.uri))
    tasks = list(table.scan().plan_files())
    assert all(len(task.delete_files) <= 1 for task in tasks)  # the newest delete file of each data file
    t.upsert(rows([3], "after"))
    t.publish("iceberg")
    agree(t)
