import pyarrow as pa
import pytest

from lakecore import Table
from tests.lakecore.table.conftest import SCHEMA, as_dict, rows


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_upsert_then_update_then_delete(table_uri, table_type):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
    t.upsert(rows([1, 2, 3], 1))
    t.upsert(rows([2, 4], 2, names=["two", "four"]))
    t.delete(pa.table({"id": pa.array([3], pa.int64())}))
    got = as_dict(t.read())
    assert sorted(got) == [1, 2, 4]
    assert got[2]["name"] == "two" and got[1]["name"] == "n1"
    assert t.read().schema == SCHEMA


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_event_time_an_older_event_never_overwrites_a_newer_one(table_uri, table_type):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
    t.upsert(rows([1, 2], [10, 10], names=["new1", "new2"]))
    t.upsert(rows([1, 2], [5, 11], names=["old1", "newer2"]))
    got = as_dict(t.read())
    assert got[1]["name"] == "new1" and got[1]["ts"] == 10
    assert got[2]["name"] == "newer2"


def test_event_time_delete_older_than_live_row_is_ignored_but_key_only_delete_applies(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    t.upsert(rows([1, 2, 3], 10))
    t.delete(pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array([5, 15], pa.int64())}))
    t.delete(pa.table({"id": pa.array([3], pa.int64())}))
    assert sorted(as_dict(t.read())) == [1]
    t.upsert(rows([3], 1))  # a key-only delete is a barrier: later writes resurrect the key
    assert sorted(as_dict(t.read())) == [1, 3]


def test_commit_time_ordering_latest_write_wins(table_uri):
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    t = Table.create(table_uri, schema=schema, record_key="id")
    t.upsert(pa.table({"id": [1, 2], "name": ["a", "b"]}))
    t.upsert(pa.table({"id": [1], "name": ["c"]}))
    assert as_dict(t.read()) == {1: {"id": 1, "name": "c"}, 2: {"id": 2, "name": "b"}}


def test_duplicate_keys_in_one_batch_are_precombined_by_ordering_field(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    t.upsert(rows([7, 7, 7], [3, 9, 4], names=["a", "b", "c"]))
    assert as_dict(t.read())[7]["name"] == "b"
    assert t.read().num_rows == 1


def test_insert_and_bulk_insert(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=3)
    res = t.bulk_insert(rows(list(range(100)), 1))
    assert {s.kind for s in res.stats} == {"base"} and res.records == 100
    t.insert(rows([100, 101], 1))
    t.bulk_insert(rows([5], 2, names=["again"]))  # non-empty file group: merged, not duplicated
    got = t.read()
    assert got.num_rows == 102 and as_dict(got)[5]["name"] == "again"


def test_partitioned_table_routes_and_prunes(table_uri):
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
    t = Table.create(table_uri, schema=schema, record_key="id", partition_fields=["dt"], buckets=2)
    t.upsert(pa.table({"id": [1, 2, 3, 4], "dt": ["2026-11-21", "2026-11-22", "2026-11-22", "a/b c"],
                       "v": [1, 2, 3, 4]}))
    assert t.read().num_rows == 4
    part = t.read(partitions={"dt": "2026-11-22"}, with_meta=True)
    assert sorted(part.column("id").to_pylist()) == [2, 3]
    assert set(part.column("_weir_partition_path").to_pylist()) == {"dt=2026-11-22"}
    assert t.read(partitions={"dt": ["a/b c"]}).column("id").to_pylist() == [4]


def test_column_projection_and_filter(table_uri):
    import pyarrow.compute as pc
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    t.upsert(rows([1, 2, 3], 1))
    t.upsert(rows([2], 5, names=["x"]))
    got = t.read(columns=["name"], filter=pc.field("value") > 1.5)
    assert got.column_names == ["name"]
    assert sorted(got.column("name").to_pylist()) == ["n3", "x"]


def test_meta_columns_on_read(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    first = t.upsert(rows([1, 2], 1)).instant
    second = t.upsert(rows([2], 2)).instant
    got = as_dict(t.read(with_meta=True))
    assert got[1]["_weir_commit_time"] == first.requested_time
    assert got[2]["_weir_commit_time"] == second.requested_time
    assert got[2]["_weir_record_key"] == "2"
    assert got[2]["_weir_file_name"].startswith(".") and second.requested_time in got[2]["_weir_file_name"]


def test_composite_record_key(table_uri):
    schema = pa.schema([("a", pa.string()), ("b", pa.int32()), ("v", pa.int64())])
    t = Table.create(table_uri, schema=schema, record_key=["a", "b"])
    t.upsert(pa.table({"a": ["x", "x", "y"], "b": pa.array([1, 2, 1], pa.int32()), "v": [1, 2, 3]}))
    t.upsert(pa.table({"a": ["x"], "b": pa.array([2], pa.int32()), "v": [20]}))
    got = {(r["a"], r["b"]): r["v"] for r in t.read().to_pylist()}
    assert got == {("x", 1): 1, ("x", 2): 20, ("y", 1): 3}
    assert as_dict(t.read(with_meta=True), "_weir_record_key")["a:x,b:2"]["v"] == 20


def test_reopen_sees_the_same_table(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    t.upsert(rows([1], 1))
    again = Table.open(f"file://{table_uri}")
    assert again.config == t.config
    assert again.read().equals(t.read())


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_a_table_of_keys_only(table_uri, table_type):
    keys = pa.schema([("id", pa.int64())])
    t = Table.create(table_uri, schema=keys, record_key="id", table_type=table_type)
    t.upsert(pa.table({"id": pa.array([1, 2, 3], pa.int64())}))
    t.delete(pa.table({"id": pa.array([2], pa.int64())}))
    assert sorted(t.read().column("id").to_pylist()) == [1, 3]
