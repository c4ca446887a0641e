"""Publishing fills Iceberg manifest bounds and Delta `stats` from the column statistics Weir records
as it writes each file: publishing new files opens no Parquet file at all (counted on the real local
filesystem), readers prune by the bounds and still return what Weir reads, and files written before
Weir recorded statistics get them from their footers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyiceberg.expressions import GreaterThan, GreaterThanOrEqual
from pyiceberg.table import StaticTable

from lakecore import Table
from lakecore.timeline.store import clear_cache
from tests.lakecore.publish import readers
from tests.support.read_counting import CountingStorage

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int32()), ("name", pa.string()), ("f", pa.float64()),
                    ("day", pa.date32()), ("at", pa.timestamp("ms", "UTC"))])


def batch(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n)
    return pa.table({"id": ids, "v": (ids // 100).astype(np.int32), "name": [f"n{i:05d}" for i in ids],
                     "f": ids / 7, "day": pa.array(ids // 50, pa.int32()).cast(pa.date32()),
                     "at": pa.array(ids * 1000, pa.int64()).cast(pa.timestamp("ms", "UTC"))}, schema=SCHEMA)


def _data_files(opened: list[str]) -> list[str]:
    return [p for p in opened if not p.startswith(("metadata/", "_delta_log/", "_delta_dv/"))]


def _table(tmp_path: Path) -> tuple[Table, CountingStorage]:
    created = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=1)
    storage = CountingStorage(created.uri)
    return Table(storage, created.config), storage


def test_publishing_new_files_opens_no_parquet_file_and_readers_prune_by_their_bounds(tmp_path) -> None:
    table, storage = _table(tmp_path)
    table.bulk_insert(batch(0, 3000))
    storage.reset()
    table.publish("iceberg")
    table.publish("delta")
    assert _data_files(storage.opened) == [], storage.opened

    iceberg = StaticTable.from_metadata(readers.iceberg_metadata(table.uri))
    [task] = list(iceberg.scan().plan_files())
    bounds = task.file
    assert bounds.null_value_counts and bounds.lower_bounds and bounds.upper_bounds
    assert iceberg.scan(row_filter=GreaterThanOrEqual("v", 1000)).to_arrow().num_rows == 0
    assert list(iceberg.scan(row_filter=GreaterThanOrEqual("v", 1000)).plan_files()) == []
    # timestamps in milliseconds are bounded in microseconds, dates in days, strings as UTF-8
    for column, beyond, inside in (("at", "1970-01-01T00:50:00+00:00", "1970-01-01T00:49:00+00:00"),
                                   ("day", "1970-03-02", "1970-02-28"), ("name", "n03", "n02")):
        assert list(iceberg.scan(row_filter=GreaterThan(column, beyond)).plan_files()) == [], column
        assert len(list(iceberg.scan(row_filter=GreaterThan(column, inside)).plan_files())) == 1, column
    whole = table.read()
    expr = pc.field("v") >= 25
    got = iceberg.scan(row_filter=GreaterThanOrEqual("v", 25)).to_arrow()
    assert readers.normalized(got.sort_by("id")).equals(
        readers.expected(whole.filter(expr).sort_by("id"), "iceberg"))

    [add] = pa.table(DeltaTable(table.uri).get_add_actions(flatten=True)).to_pylist()
    assert add["num_records"] == 3000 and add["null_count.v"] == 0
    assert (add["min.v"], add["max.v"]) == (0, 29)
    assert (add["min.name"], add["max.name"]) == ("n00000", "n02999")
    assert str(add["min.day"]) == "1970-01-01"


def test_files_written_before_statistics_get_them_from_their_footers(tmp_path) -> None:
    table, storage = _table(tmp_path)
    table.bulk_insert(batch(0, 1000))
    instant_file = next((Path(table.uri) / ".weir" / "timeline").glob("*_*.deltacommit"))
    body = json.loads(instant_file.read_bytes())
    for s in body["write_stats"]:
        del s["stats"]  # as Weir wrote it before recording statistics
    instant_file.write_text(json.dumps(body, separators=(",", ":")))
    clear_cache()
    table = Table(storage, table.config)
    storage.reset()
    table.publish("iceberg")
    assert len(_data_files(storage.opened)) == 1, "its footer, once"
    iceberg = StaticTable.from_metadata(readers.iceberg_metadata(table.uri))
    assert list(iceberg.scan(row_filter=GreaterThanOrEqual("v", 10)).plan_files()) == []
    [task] = list(iceberg.scan(row_filter=GreaterThanOrEqual("v", 9)).plan_files())
    assert task.file.record_count == 1000
