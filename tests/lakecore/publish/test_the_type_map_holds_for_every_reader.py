"""Every column type a Weir table stores reads back from each target as the type map says (narrow
integers widened, timestamps in microseconds, any zone as UTC), with the same values; a type a target
cannot hold is refused before anything is written, naming the column."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.errors import NotPublishable
from tests.lakecore.publish import readers

COMMON = [
    pa.field("k", pa.int64(), nullable=False),
    pa.field("b", pa.bool_()), pa.field("i8", pa.int8()), pa.field("i16", pa.int16()),
    pa.field("i32", pa.int32()), pa.field("u8", pa.uint8()), pa.field("u16", pa.uint16()),
    pa.field("u32", pa.uint32()), pa.field("f32", pa.float32()), pa.field("f64", pa.float64()),
    pa.field("s", pa.string()), pa.field("ls", pa.large_string()), pa.field("bin", pa.binary()),
    pa.field("d", pa.date32()), pa.field("dec", pa.decimal128(12, 3)),
    pa.field("ts_ms", pa.timestamp("ms")), pa.field("ts_us_utc", pa.timestamp("us", "UTC")),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("pt", pa.struct([("x", pa.int16()), ("y", pa.float64())])),
]
ICEBERG_ONLY = [pa.field("t_us", pa.time64("us"))]
DELTA_ONLY = [pa.field("ts_s_paris", pa.timestamp("s", "Europe/Paris"))]


def sample(schema: pa.Schema) -> pa.Table:
    n = 4
    values = {
        "k": list(range(n)), "b": [True, False, None, True], "i8": [-128, 0, 127, None],
        "i16": [-5, 0, 5, None], "i32": [1, 2, None, 4], "u8": [0, 255, 1, None],
        "u16": [0, 65535, 2, None], "u32": [0, 4294967295, 3, None], "f32": [1.5, None, -2.25, 0.0],
        "f64": [1e300, None, -0.5, 2.0], "s": ["a", "", None, "ü"], "ls": ["x", None, "y", "z"],
        "bin": [b"\x00\x01", None, b"", b"z"], "d": [dt.date(2026, 11, 22), None, dt.date(1970, 1, 1),
                                                     dt.date(2000, 2, 29)],
        "dec": [Decimal("1.500"), None, Decimal("-999999999.999"), Decimal("0.001")],
        "ts_ms": [dt.datetime(2026, 11, 22, 10, 15, 0, 123000), None, dt.datetime(1970, 1, 1),
                  dt.datetime(2000, 1, 1, 0, 0, 1)],
        "ts_us_utc": [dt.datetime(2026, 11, 22, 10, 15, 0, 123456, tzinfo=dt.UTC), None,
                      dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=dt.UTC),
                      dt.datetime(2030, 1, 1, tzinfo=dt.UTC)],
        "ts_s_paris": [dt.datetime(2026, 11, 22, 10, 15, tzinfo=dt.UTC), None, None,
                       dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC)],
        "tags": [["a", "b"], [], None, ["c"]],
        "pt": [{"x": 1, "y": 2.0}, None, {"x": None, "y": 0.5}, {"x": -1, "y": None}],
        "t_us": [dt.time(10, 15, 0, 123456), None, dt.time(0, 0), dt.time(23, 59, 59, 999999)],
    }
    return pa.table({f.name: pa.array(values[f.name], f.type) for f in schema}, schema=schema)


@pytest.mark.parametrize("target,extra", [("iceberg", ICEBERG_ONLY), ("delta", DELTA_ONLY)])
def test_every_type_reads_back_as_the_type_map_says(tmp_path, target, extra):
    schema = pa.schema([*COMMON, *extra])
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="k", buckets=1)
    t.upsert(sample(schema))
    t.delete(pa.table({"k": pa.array([3], pa.int64())}))
    t.publish(target)
    for reader in [r for r, of in readers.TARGET_OF.items() if of == target]:
        readers.assert_same(readers.READERS[reader](t.uri), readers.expected(t.read(), target), ["k"],
                            reader=reader)


@pytest.mark.parametrize("target,field,why", [
    ("iceberg", pa.field("ts", pa.timestamp("ns")), "microseconds"),
    ("delta", pa.field("ts", pa.timestamp("ns", "UTC")), "microseconds"),
    ("iceberg", pa.field("big", pa.uint64()), "unsigned"),
    ("delta", pa.field("big", pa.uint64()), "unsigned"),
    ("delta", pa.field("at", pa.time64("us")), "no time-of-day type"),
    ("iceberg", pa.field("at", pa.time64("ns")), "microseconds"),
    ("iceberg", pa.field("at", pa.time32("ms")), "microseconds"),
    ("iceberg", pa.field("nested", pa.list_(pa.timestamp("ns"))), "microseconds"),
    ("iceberg", pa.field("local", pa.timestamp("us", "Europe/Paris")), "other than UTC"),
])
def test_a_type_the_target_cannot_hold_is_refused(tmp_path, target, field, why):
    schema = pa.schema([pa.field("k", pa.int64()), field])
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="k", buckets=1)
    t.upsert(pa.table({"k": pa.array([1], pa.int64()), field.name: pa.nulls(1, field.type)}))
    with pytest.raises(NotPublishable, match=rf"column '{field.name}.*' has type .*{why}.*docs/interop.md"):
        t.publish(target)
    assert not (tmp_path / "t" / "metadata").exists() and not (tmp_path / "t" / "_delta_log").exists()
    assert not (tmp_path / "t" / ".weir" / "publish").exists()
