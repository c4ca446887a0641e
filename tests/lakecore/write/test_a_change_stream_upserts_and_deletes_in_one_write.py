"""An upsert whose input carries `_weir_op` per row is a change stream (CDC): upserts and deletes land in one
instant, a delete row needs only its key, deletes and upserts are ordered by the ordering field like any
two changes, and a bad op column is refused before any instant exists."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.config import OP, OP_DELETE, OP_UPSERT
from lakecore.errors import InvalidInput, SchemaMismatch

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.int64()),
                    pa.field("name", pa.string(), nullable=False)])


def changes(ids, ts, names, ops) -> pa.Table:
    return pa.table({"id": ids, "ts": ts, "name": names, OP: pa.array(ops, pa.int8())})


# copy-on-write with a nullable `name`: a copy-on-write delete of a row with a non-nullable value column
# fails in lakecore today whatever the write (its tombstone row is stored with nulls), a separate bug
@pytest.mark.parametrize("table_type,schema", [
    ("merge_on_read", SCHEMA),
    ("copy_on_write", pa.schema([SCHEMA.field("id"), SCHEMA.field("ts"), pa.field("name", pa.string())]))])
def test_upserts_and_deletes_land_in_one_instant_ordered_by_the_ordering_field(tmp_path, table_type, schema):
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="id", ordering_field="ts", buckets=2,
                     table_type=table_type)
    t.write(pa.table({"id": [1, 2, 3], "ts": [1, 1, 1], "name": ["a", "b", "c"]}, schema=schema), "upsert")

    result = t.write(changes([1, 2, 4, 3], [5, 5, 5, 0], ["a2", None, "d", None],
                             [OP_UPSERT, OP_DELETE, OP_UPSERT, OP_DELETE]), "upsert")

    got = {r["id"]: r["name"] for r in Table.open(t.uri).read().to_pylist()}
    # 2 is deleted; the delete of 3 is older (ts 0) than its row (ts 1), so 3 stays
    assert got == {1: "a2", 3: "c", 4: "d"}
    assert len(Table.open(t.uri).timeline().completed) == 2
    assert sum(s.deletes for s in result.stats) == 2


def test_a_bad_op_column_or_another_operation_is_refused_before_any_instant(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1)
    with pytest.raises(InvalidInput, match=r"upsert.*or 1 .*delete"):
        t.write(changes([1], [1], ["a"], [7]), "upsert")
    with pytest.raises(InvalidInput, match="comes with operation 'upsert'"):
        t.write(changes([1], [1], ["a"], [OP_UPSERT]), "insert")
    t.write(changes([], [], [], []), "upsert")   # an empty change stream is no error (a schema check)
    with pytest.raises(SchemaMismatch, match="'name' is declared non-nullable"):
        t.write(changes([1], [1], [None], [OP_UPSERT]), "upsert")   # an upsert row still needs it
    assert len(Table.open(t.uri).timeline().completed) == 1   # the empty one
