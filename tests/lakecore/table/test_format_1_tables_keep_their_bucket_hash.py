"""Format 2: a new table records `bucket_hash` "spark_murmur3" (Spark's own hash(), so Spark jobs route
rows in the JVM) and lakecore's writers put every key in the bucket that hash names. A table an older
lakecore made (format 1, no `bucket_hash` in table.json) keeps its format-1 hash for ever: it opens,
takes writes and routes keys exactly as before. A lakecore that knows format 1 only refuses format 2."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.config import FORMAT_VERSION, META_COLUMNS, TableConfig
from lakecore.errors import InvalidTableConfig, UnsupportedTableVersion
from lakecore.layout import bucket_file_id, buckets, murmur3, parse_data_file_name
from tests.support.formats import as_format_1

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.int64())])
CONFIG = ".weir/table.json"


def rows(ids, ts=1):
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i % 7}" for i in ids],
                     "ts": pa.array([ts] * len(ids), pa.int64())})


def file_ids_by_key(t: Table) -> dict[tuple[int, str], str]:
    read = Table.open(t.uri).read(with_meta=True)
    files = [parse_data_file_name(f.rsplit("/", 1)[-1]) for f in read["_weir_file_name"].to_pylist()]
    return {(i, n): f.file_id for i, n, f in zip(read["id"].to_pylist(), read["name"].to_pylist(), files,
                                                 strict=True) if f is not None}


def expected(keys: dict[tuple[int, str], str], bucket_of) -> dict[tuple[int, str], str]:
    ids = pa.array([k[0] for k in keys], pa.int64())
    names = pa.array([k[1] for k in keys])
    return dict(zip(keys, [bucket_file_id(b) for b in bucket_of([ids, names], 4).tolist()], strict=True))


def test_new_tables_route_by_sparks_hash_and_format_1_tables_by_theirs(tmp_path):
    new = Table.create(str(tmp_path / "new"), schema=SCHEMA, record_key=["id", "name"], ordering_field="ts")
    recorded = json.loads(new.storage.read(CONFIG))
    assert FORMAT_VERSION == 2 and recorded["format_version"] == 2
    assert recorded["bucket_hash"] == new.config.bucket_hash == "spark_murmur3"
    new.upsert(rows(range(200)))
    new.upsert(rows(range(100, 300), ts=2))
    placed = file_ids_by_key(new)
    assert len(placed) == 300 and placed == expected(placed, murmur3.bucket_of)

    old = as_format_1(Table.create(str(tmp_path / "old"), schema=SCHEMA, record_key=["id", "name"],
                                   ordering_field="ts"))
    assert old.config.bucket_hash == "weir_v1" and old.config.format_version == 1
    old.upsert(rows(range(200)))
    old.upsert(rows(range(100, 300), ts=2))
    placed = file_ids_by_key(old)
    assert len(placed) == 300 and placed == expected(placed, buckets.bucket_of)
    assert placed != expected(placed, murmur3.bucket_of)  # the two hashes do differ on these keys
    reopened = Table.open(old.uri)
    assert reopened.config.bucket_hash == "weir_v1" and reopened.config.format_version == 1
    assert reopened.read().num_rows == 300 and set(META_COLUMNS).isdisjoint(reopened.read().column_names)


def test_the_format_is_refused_where_it_cannot_hold():
    newer = TableConfig(name="t", schema=SCHEMA, record_key=("id",)).to_json()
    newer["format_version"] = FORMAT_VERSION + 1  # what a format-2 table is to a format-1 lakecore
    with pytest.raises(UnsupportedTableVersion, match="upgrade weir"):
        TableConfig.from_json(newer)
    with pytest.raises(InvalidTableConfig, match="needs table format 2"):
        TableConfig(name="t", schema=SCHEMA, record_key=("id",), format_version=1,
                    bucket_hash="spark_murmur3")
    with pytest.raises(InvalidTableConfig, match="bucket_hash must be one of"):
        TableConfig(name="t", schema=SCHEMA, record_key=("id",), bucket_hash="md5")  # type: ignore[arg-type]
    legacy = TableConfig.from_json({k: v for k, v in newer.items() if k != "bucket_hash"}
                                   | {"format_version": 1})
    assert legacy.bucket_hash == "weir_v1" and TableConfig.from_json(legacy.to_json()) == legacy
