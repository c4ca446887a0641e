"""`Table.create_from_config(uri, config)` creates a table from a whole `TableConfig` value (what the
operator translates a LakeTable spec into): table.json records what `Table.create` records for the same
values — column groups normalized (a group's own ordering field travels with it), a ZooKeeper lock
without a path given the table's default one — and the table takes writes; an existing table is never
overwritten."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore import ColumnGroup, Table, TableConfig
from lakecore.concurrency.locks.zookeeper import zookeeper_spec
from lakecore.config import LockSpec
from lakecore.errors import TableAlreadyExists

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.string()), ("a_ts", pa.int64()),
                    ("b", pa.string()), ("b_ts", pa.int64())])
GROUPS = (ColumnGroup("ga", ("a",), "a_ts"), ColumnGroup("gb", ("b",), "b_ts"))


def config(lock: LockSpec | None = None) -> TableConfig:
    return TableConfig(name="people", schema=SCHEMA, record_key=("id",), merge_mode="partial_update",
                       column_groups=GROUPS, buckets=2, lock=lock or LockSpec())


def test_a_config_value_makes_the_table_create_makes(tmp_path) -> None:
    made = Table.create_from_config(str(tmp_path / "from-config"), config())
    created = Table.create(str(tmp_path / "created"), schema=SCHEMA, record_key="id", column_groups=GROUPS,
                           buckets=2, name="people")
    recorded = Table.open(made.uri).config
    assert recorded == Table.open(created.uri).config == made.config
    assert recorded.group("ga").columns == ("a", "a_ts")   # normalized, as create records it
    made.upsert(pa.table({"id": pa.array([1], pa.int64()), "a": ["x"], "a_ts": [1]}))
    assert Table.open(made.uri).read().to_pylist() == [
        {"id": 1, "a": "x", "a_ts": 1, "b": None, "b_ts": None}]


def test_a_zookeeper_lock_without_a_path_gets_the_tables_default(tmp_path) -> None:
    uri = str(tmp_path / "zk")
    t = Table.create_from_config(uri, config(LockSpec("zookeeper", connect="zk:2181")))
    assert Table.open(uri).config.lock == zookeeper_spec("zk:2181", t.uri)
    assert Table.open(uri).config.lock.path is not None
    named = str(tmp_path / "named")
    Table.create_from_config(named, config(LockSpec("zookeeper", connect="zk:2181", path="/weir/people")))
    assert Table.open(named).config.lock == LockSpec("zookeeper", connect="zk:2181", path="/weir/people")


def test_an_existing_table_is_not_overwritten(tmp_path) -> None:
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA.remove(4).remove(3), record_key="id")
    with pytest.raises(TableAlreadyExists, match="already exists"):
        Table.create_from_config(uri, config())
    assert Table.open(uri).config.schema.names == ["id", "a", "a_ts"]
