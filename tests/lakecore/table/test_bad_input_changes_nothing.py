"""Every kind of bad input raises a typed error whose message says what to do, and commits nothing."""

import os

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.errors import (
    CorruptMetadata,
    InvalidInput,
    InvalidTableConfig,
    MissingColumn,
    NullKey,
    SchemaMismatch,
    TableAlreadyExists,
    TableNotFound,
    UnsupportedType,
)
from lakecore.timeline.store import clear_cache
from tests.lakecore.table.conftest import SCHEMA, rows


@pytest.fixture
def table(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    t.upsert(rows([1, 2], 1))
    return t


def _snapshot(t):
    files = sorted(os.path.relpath(os.path.join(d, f), t.uri) for d, _, fs in os.walk(t.uri) for f in fs)
    return files, t.read().sort_by("id")


@pytest.mark.parametrize("data, error, hint", [
    (pa.table({"id": pa.array([3], pa.int64()), "ts": [1], "name": ["x"], "value": [1.0], "extra": [1]}),
     SchemaMismatch, "not in the table schema"),
    (pa.table({"ts": [1], "name": ["x"], "value": [1.0]}), MissingColumn, "record key"),
    (pa.table({"id": pa.array([3], pa.int64()), "name": ["x"], "value": [1.0]}), MissingColumn, "ts"),
    (pa.table({"id": pa.array([3], pa.int64()), "name": ["x"], "value": [1.0]}), MissingColumn,
     r"lacks ordering field column\(s\) \['ts'\]; input has .*: every row needs its ordering field value, "
     r"add the column"),
    (pa.table({"id": pa.array([3, None], pa.int64()), "ts": [1, 1], "name": ["x", "y"], "value": [1.0, 2.0]}),
     NullKey, "null record key"),
    (pa.table({"id": pa.array([3], pa.int64()), "ts": pa.array([None], pa.int64()), "name": ["x"],
               "value": [1.0]}), InvalidInput, "null ordering field"),
    (pa.table({"id": pa.array([3], pa.int64()), "ts": [1], "name": [1], "value": [1.0]}),
     SchemaMismatch, "cast it to string"),
    (pa.table({"id": pa.array([3], pa.int64()), "ts": [1], "name": ["x"],
               "value": pa.array([pa.scalar(1, pa.duration("s"))])}), UnsupportedType, "duration"),
    ({"id": [1]}, InvalidInput, "pyarrow.Table"),
])
def test_bad_write_is_refused_and_changes_nothing(table, data, error, hint):
    before = _snapshot(table)
    with pytest.raises(error, match=hint):
        table.upsert(data)
    after = _snapshot(table)
    assert before[0] == after[0] and before[1].equals(after[1])


def test_narrower_types_are_widened_losslessly(table):
    table.upsert(pa.table({"id": pa.array([3], pa.int32()), "ts": pa.array([1], pa.int8()),
                           "name": pa.array(["x"], pa.large_string()), "value": pa.array([1], pa.int16())}))
    assert table.read().num_rows == 3


@pytest.mark.parametrize("kwargs, hint", [
    (dict(record_key="nope"), "not in the schema"),
    (dict(record_key="value"), "use a string, integer"),
    (dict(record_key="id", ordering_field="missing"), "ordering field"),
    (dict(record_key="id", merge_mode="event_time"), "needs an ordering_field"),
    (dict(record_key="id", buckets=0), "buckets"),
    (dict(record_key="id", table_type="nope"), "table_type"),
])
def test_invalid_table_configs_are_refused(tmp_path, kwargs, hint):
    with pytest.raises(InvalidTableConfig, match=hint):
        Table.create(str(tmp_path / "x"), schema=SCHEMA, **kwargs)
    assert not (tmp_path / "x").exists()


def test_unsupported_schema_type_at_create(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("d", pa.dictionary(pa.int32(), pa.string()))])
    with pytest.raises(UnsupportedType, match="decode it first"):
        Table.create(str(tmp_path / "x"), schema=schema, record_key="id")


def test_create_twice_and_open_missing(table, tmp_path):
    with pytest.raises(TableAlreadyExists, match=r"Table\.open"):
        Table.create(table.uri, schema=SCHEMA, record_key="id")
    with pytest.raises(TableNotFound, match="weir table create"):
        Table.open(str(tmp_path / "nothing-here"))


@pytest.mark.parametrize("damage", [b"", b"{\"format_version\": 1, \"name\"", b"\x00\xff garbage", b"[]"])
def test_corrupted_table_config(table, damage):
    with open(os.path.join(table.uri, ".weir", "table.json"), "wb") as fh:
        fh.write(damage)
    with pytest.raises(CorruptMetadata, match="backup"):
        Table.open(table.uri)


def test_truncated_completed_instant(table):
    inst = table.timeline().completed[-1]
    path = os.path.join(table.uri, ".weir", "timeline", inst.file_name)
    with open(path, "rb") as fh:
        data = fh.read()
    with open(path, "wb") as fh:
        fh.write(data[: len(data) // 2])
    clear_cache()  # this process cached the file when it wrote it
    with pytest.raises(CorruptMetadata, match=inst.file_name):
        Table.open(table.uri).read()


def test_floats_go_into_a_decimal_column_only_exactly(tmp_path):
    """JSON numbers come as doubles (pyarrow's and Spark's readers alike): into a decimal column they were
    refused ("cast it"), which a LakeWriter cannot do. Each is written where the decimal holds it exactly;
    one it would round is refused, naming it, and nothing is written."""
    from decimal import Decimal

    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("d", pa.decimal128(10, 2))]),
                     record_key="id")
    t.upsert(pa.table({"id": [1, 2, 3], "d": [1.25, 0.1, None]}))
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "d": Decimal("1.25")}, {"id": 2, "d": Decimal("0.10")}, {"id": 3, "d": None}]
    before = _snapshot(t)
    told = r"column 'd': 1.999 does not fit decimal128\(10, 2\) exactly \(it would be stored as 2.00\)"
    with pytest.raises(SchemaMismatch, match=told):
        t.upsert(pa.table({"id": [4, 5], "d": [1.5, 1.999]}))
    after = _snapshot(t)
    assert before[0] == after[0] and before[1].equals(after[1])
    # every price of two digits is exact, also those Arrow's decimal-to-float cast reads back inexactly
    # (19.99 as 19.990000000000002: refused before)
    cents = list(range(10_000))
    t.upsert(pa.table({"id": cents, "d": [c / 100 for c in cents]}))
    assert sorted((r["id"], r["d"]) for r in t.read().to_pylist()) == [(c, Decimal(c) / 100) for c in cents]


def test_a_delete_naming_a_column_the_table_lacks_is_told_what_a_delete_takes(table):
    """`t.delete(pa.table({"idd": [1]}))` was told to add `idd` to the table (`--evolve-schema`,
    `Table.add_columns`): advice for an upsert, wrong for a delete, which names existing keys."""
    before = _snapshot(table)
    said = r"\['idd'\] are not in the table schema .*did you mean 'id'.*; a delete takes the record key " \
        r"\['id'\] \(and the ordering field"
    with pytest.raises(SchemaMismatch, match=said):
        table.delete(pa.table({"idd": pa.array([1], pa.int64())}))
    files, rows_ = _snapshot(table)
    assert files == before[0] and rows_.equals(before[1])
