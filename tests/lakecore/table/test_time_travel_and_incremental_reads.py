import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.errors import BeforeFirstCommit, InvalidInput
from tests.lakecore.table.conftest import SCHEMA, as_dict, rows


def test_as_of_an_instant_sees_exactly_that_instant_and_earlier(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    a = t.upsert(rows([1, 2], 1)).instant
    b = t.upsert(rows([2, 3], 2, names=["b2", "b3"])).instant
    t.delete(pa.table({"id": pa.array([1], pa.int64())}))
    assert sorted(as_dict(t.read(as_of=a.requested_time))) == [1, 2]
    at_b = as_dict(t.read(as_of=b.requested_time))
    assert sorted(at_b) == [1, 2, 3] and at_b[2]["name"] == "b2"
    assert sorted(as_dict(t.read(as_of=b.completion_time))) == [1, 2, 3]
    assert sorted(as_dict(t.read())) == [2, 3]
    with pytest.raises(BeforeFirstCommit):  # not an empty table: see test_time_travel_before_the_first_commit
        t.read(as_of="2000-01-01T00:00:00")


def test_read_changes_returns_latest_version_of_changed_keys_with_deletes(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    a = t.upsert(rows([1, 2, 3], 1)).instant
    b = t.upsert(rows([2], 2, names=["b2"])).instant
    c = t.delete(pa.table({"id": pa.array([3], pa.int64())})).instant
    ch = t.read_changes(a.requested_time)
    got = {r["id"]: (r["_weir_op"], r["name"], r["_weir_commit_time"]) for r in ch.to_pylist()}
    assert got == {2: ("upsert", "b2", b.requested_time), 3: ("delete", None, c.requested_time)}
    only_b = t.read_changes(a.requested_time, b.requested_time)
    assert only_b.column("id").to_pylist() == [2]
    everything = t.read_changes("19700101000000000", a.requested_time)
    assert sorted(everything.column("id").to_pylist()) == [1, 2, 3]
    assert t.read_changes(c.requested_time).num_rows == 0


def test_read_changes_takes_the_instants_writes_return_and_refuses_an_end_before_its_start(table_uri):
    """`read(as_of=result.instant)` worked, `read_changes(result.instant)` said an Instant was "neither an
    instant time nor an ISO-8601 timestamp"; an end before the start gave 0 rows and no word."""
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    a = t.upsert(rows([1, 2], 1)).instant
    b = t.upsert(rows([2], 2, names=["b2"])).instant
    assert t.read_changes(a).column("id").to_pylist() == [2]
    assert t.read_changes("000", a).num_rows == 2
    assert t.read_changes(a, b).column("id").to_pylist() == [2]
    said = rf"the end {a.requested_time} \(completed \d{{17}}\) is before the start {b.requested_time} " \
        rf"\(completed \d{{17}}\).*swap them"
    with pytest.raises(InvalidInput, match=said):
        t.read_changes(b, a)


def test_a_delete_is_a_change_only_for_a_record_the_table_held(table_uri):
    """A delete naming keys the table never held (an erasure list of 2M ids, 300 of them in the table)
    used to put a tombstone for every key in the change feed; so did a record inserted and deleted
    within the range. Only records held at the start are told deleted."""
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    a = t.upsert(rows([1, 2, 3], 1)).instant
    t.upsert(rows([5], 1))                                                       # inserted in the range ...
    b = t.delete(pa.table({"id": pa.array([2, 5, 99, 100], pa.int64())})).instant   # ... and deleted in it
    got = {r["id"]: r["_weir_op"] for r in t.read_changes(a).to_pylist()}
    assert got == {2: "delete"}
    assert {r["id"]: r["_weir_op"] for r in t.read_changes("000").to_pylist()} == {1: "upsert", 3: "upsert"}
    t.upsert(rows([2], 2))                       # deleted, then back: an upsert
    assert {r["id"]: r["_weir_op"] for r in t.read_changes(a).to_pylist()} == {2: "upsert"}
    assert t.read_changes(b).column("id").to_pylist() == [2]


def test_read_changes_orders_writes_by_completion_not_by_request(table_uri):
    """Concurrent writers: B requested before A, A completed first. `read_changes(A, B)` is B's changes
    (by completion time, as the docstring says); it was refused as "the end is before the start", and the
    swap it advised returned 0 rows."""
    from lakecore.concurrency import begin_write, commit_write
    from lakecore.write import conform, route, write_file_group

    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=8)

    def begin(ids: list[int]) -> tuple[object, list[object]]:
        txn = begin_write(t.storage, t.config, t.lock, "upsert")
        stats = [s for g in route(conform(rows(ids, 1), t.config, "upsert").rows, t.config)
                 for s in write_file_group(txn.context(), g)]
        return txn, stats

    b_txn, b_stats = begin([1])
    a_txn, a_stats = begin([2])
    assert b_txn.instant.requested_time < a_txn.instant.requested_time
    a = commit_write(a_txn, a_stats, lock=t.lock)   # A completes first
    b = commit_write(b_txn, b_stats, lock=t.lock)
    assert a.completion_time < b.completion_time
    assert t.read_changes(a, b).column("id").to_pylist() == [1]
    assert t.read_changes(a.requested_time, b.requested_time).column("id").to_pylist() == [1]
    assert sorted(t.read_changes("000", a).column("id").to_pylist()) == [2]
    with pytest.raises(InvalidInput, match="swap them"):
        t.read_changes(b, a)


def test_pending_instants_are_invisible(table_uri):
    from lakecore.concurrency import begin_write
    from lakecore.write import conform, route, write_file_group

    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    t.upsert(rows([1], 1))
    txn = begin_write(t.storage, t.config, t.lock, "upsert")
    for g in route(conform(rows([1, 2], 9, names=["x", "y"]), t.config, "upsert").rows, t.config):
        write_file_group(txn.context(), g)  # files on disk, instant never completed
    assert as_dict(t.read()) == as_dict(Table.open(table_uri).read())
    assert sorted(as_dict(t.read())) == [1] and as_dict(t.read())[1]["name"] == "n1"
    assert [i.requested_time for i in t.timeline().pending] == [txn.instant.requested_time]
    t.maintenance.rollback(txn.instant.requested_time, dry_run=False, force=True)  # the writer is this test
    assert t.timeline().pending == ()
    assert sorted(as_dict(t.read())) == [1]
