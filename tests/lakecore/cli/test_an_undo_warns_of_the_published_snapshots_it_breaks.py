"""A rollback or restore of instants a published Iceberg or Delta snapshot shows deletes files those
snapshots read: the plan says so before `--yes`, the result says so after, with the command that points
the published table at the table as it is (before, nothing said it and readers failed on a missing file).
Publishing again makes the published table read as the table does."""

from __future__ import annotations

import json

import pyarrow as pa

from lakecore import Table
from tests.lakecore.cli.test_weir_table_commands import weir
from tests.support.readers.in_process import deltalake_query

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def published_table(tmp_path) -> tuple[Table, str, str]:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", table_type="copy_on_write")
    first = t.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA)).instant.requested_time
    second = t.upsert(pa.table({"id": [2, 3], "v": ["B", "c"]}, schema=SCHEMA)).instant.requested_time
    t.publish("iceberg")
    t.publish("delta")
    return t, first, second


def test_a_rollback_says_which_published_snapshots_it_breaks(tmp_path) -> None:
    t, _, second = published_table(tmp_path)
    code, said = weir("table", "rollback", t.uri, second)
    assert code == 0, said
    assert f"warning: published snapshots read data files this deletes (iceberg: 1 snapshot, of instant " \
           f"{second}; delta: 1 snapshot, of instant {second})" in said, said
    assert "weir table publish URI --format iceberg and --format delta" in said
    code, said = weir("table", "rollback", t.uri, second, "--json")
    assert code == 0 and json.loads(said)["published"] == [f"iceberg: 1 snapshot, of instant {second}",
                                                            f"delta: 1 snapshot, of instant {second}"], said

    code, said = weir("table", "rollback", t.uri, second, "--yes")
    assert code == 0 and f"rolled back {second}" in said, said
    assert "published snapshots read data files this deleted" in said, said
    assert "reading those snapshots fails" in said
    assert weir("table", "publish", t.uri, "--format", "delta")[0] == 0
    rows = sorted(deltalake_query(t.uri).to_pylist(), key=lambda r: r["id"])
    assert rows == Table.open(t.uri).read().sort_by("id").to_pylist()
    assert rows == [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}]


def test_a_restore_says_it_too_and_an_unpublished_table_says_nothing(tmp_path) -> None:
    t, first, second = published_table(tmp_path)
    Table.open(t.uri).maintenance.savepoint(first)
    code, said = weir("table", "restore", t.uri, first)
    assert code == 0, said
    assert f"(iceberg: 1 snapshot, of instant {second}; delta: 1 snapshot, of instant {second})" in said, said
    plain = Table.create(str(tmp_path / "plain"), schema=SCHEMA, record_key="id", table_type="copy_on_write")
    done = plain.upsert(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA)).instant.requested_time
    code, said = weir("table", "rollback", plain.uri, done)
    assert code == 0 and "published" not in said, said


def test_published_metadata_that_does_not_read_never_stops_an_undo(tmp_path) -> None:
    t, _, second = published_table(tmp_path)
    for metadata in (tmp_path / "t" / "metadata").glob("*.metadata.json"):
        metadata.write_text("{not json")
    code, said = weir("table", "rollback", t.uri, second, "--yes")
    assert code == 0 and f"rolled back {second}" in said, said
    assert "(delta: 1 snapshot, of instant" in said, said   # the Iceberg metadata shows nothing now
