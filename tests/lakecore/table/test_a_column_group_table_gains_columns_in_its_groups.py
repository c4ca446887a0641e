"""A column-group table gains a nullable column only into a named group (`Table.add_columns(groups=)`):
the group's writers then write it and every query reads it back, rows written before read null. A new
column in no group, or an existing one moved to another group, is refused and changes nothing; a handle
opened before the column was written is told to open the table again instead of dropping it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore import ColumnGroup, Table
from lakecore.errors import InvalidTableConfig, MissingColumn, SchemaConflict

SCHEMA = pa.schema([("id", pa.int64()), ("clicks", pa.int64()), ("click_ts", pa.int64()),
                    ("country", pa.string()), ("dim_ts", pa.int64())])
GROUPS = [ColumnGroup("clicks", ("clicks",), "click_ts"), ColumnGroup("dims", ("country",), "dim_ts")]
REGION = pa.field("region", pa.string())


def clicks(ids: list[int], ts: int) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "clicks": pa.array([i * 10 for i in ids], pa.int64()),
                     "click_ts": pa.array([ts] * len(ids), pa.int64())})


def dims(ids: list[int], ts: int, *, region: bool) -> pa.Table:
    cols = {"id": pa.array(ids, pa.int64()), "country": [f"c{i}" for i in ids],
            "dim_ts": pa.array([ts] * len(ids), pa.int64())}
    if region:
        cols["region"] = [f"r{i}" for i in ids]
    return pa.table(cols)


def rows(t: Table, **read: object) -> dict[int, dict[str, object]]:
    return {r["id"]: {k: v for k, v in r.items() if not k.startswith("_weir_")}
            for r in t.read(**read).to_pylist()}  # type: ignore[arg-type]


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_a_column_added_to_a_group_is_written_by_its_writers_and_read_back(tmp_path, table_type):
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=SCHEMA, record_key="id", column_groups=GROUPS, buckets=2,
                     table_type=table_type)
    t.upsert(clicks([1, 2], 100))
    before = t.upsert(dims([1, 2], 100, region=False)).instant

    schema = t.add_columns([REGION], groups={"region": "dims"})
    assert schema.names == [*SCHEMA.names, "region"]
    reopened = Table.open(uri)
    assert reopened.config.group("dims").columns == ("country", "dim_ts", "region")
    assert reopened.schema.field("region").nullable
    assert rows(reopened)[1]["region"] is None           # rows written before read null
    if table_type == "merge_on_read":
        reopened.maintenance.compact()                                # before any write carried it

    with pytest.raises(MissingColumn, match=r"'dims' partly: it lacks \['region'\]"):
        reopened.upsert(dims([2], 200, region=False))    # a write updates whole groups, the new column too
    reopened.upsert(dims([2, 3], 200, region=True))
    reopened.upsert(clicks([3], 200))                     # the other group's writers are unaffected
    expected = {1: {"id": 1, "clicks": 10, "click_ts": 100, "country": "c1", "dim_ts": 100, "region": None},
                2: {"id": 2, "clicks": 20, "click_ts": 100, "country": "c2", "dim_ts": 200, "region": "r2"},
                3: {"id": 3, "clicks": 30, "click_ts": 200, "country": "c3", "dim_ts": 200, "region": "r3"}}
    assert rows(Table.open(uri)) == expected
    assert rows(t) == expected                            # the handle that added it reads it too
    assert all(r["region"] is None for r in rows(t, as_of=before.requested_time).values())
    if table_type == "merge_on_read":
        t.maintenance.compact()
        assert rows(Table.open(uri)) == expected
    assert t.add_columns([REGION], groups={"region": "dims"}).names == schema.names  # again: a no-op


def test_a_new_column_without_a_group_or_moving_a_column_is_refused_and_changes_nothing(tmp_path):
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=SCHEMA, record_key="id", column_groups=GROUPS)
    t.upsert(clicks([1], 100))
    config = (tmp_path / "t" / ".weir" / "table.json").read_bytes()

    with pytest.raises(InvalidTableConfig, match=r"new column\(s\) \['region'\] name no column group, and "
                                                 r"every data column .* name one of \['clicks', 'dims'\]"):
        t.add_columns([REGION])
    with pytest.raises(InvalidTableConfig, match="there is no column group 'geo'"):
        t.add_columns([REGION], groups={"region": "geo"})
    with pytest.raises(InvalidTableConfig, match="'country' is in group 'dims', and a column never moves"):
        t.add_columns([pa.field("country", pa.string())], groups={"country": "clicks"})
    with pytest.raises(InvalidTableConfig, match="new column 'region' must be nullable"):
        t.add_columns([pa.field("region", pa.string(), nullable=False)], groups={"region": "dims"})
    assert (tmp_path / "t" / ".weir" / "table.json").read_bytes() == config
    assert Table.open(uri).schema.names == SCHEMA.names


def test_a_handle_older_than_a_written_column_is_told_to_open_the_table_again(tmp_path):
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", column_groups=GROUPS).upsert(clicks([1], 100))
    old = Table.open(uri)
    Table.open(uri).add_columns([REGION], groups={"region": "dims"})
    old.upsert(dims([1], 100, region=False))              # nothing wrote the column yet: no harm
    Table.open(uri).upsert(dims([2], 200, region=True))

    with pytest.raises(SchemaConflict, match=r"gained column\(s\) \['region'\] since this handle read its "
                                             r"configuration; open the table again"):
        old.upsert(dims([1], 300, region=False))
    assert old.timeline().pending == ()                   # its instant was rolled back
    assert rows(Table.open(uri))[2]["region"] == "r2"
