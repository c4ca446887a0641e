"""Published metadata sits beside the table (`metadata/`, `_delta_log/`, `_delta_dv/` at its root,
where other engines look for it) and never confuses Weir: a listing of the table skips those
directories (a partition directory is always `field=value`, an unpartitioned table keeps its data
files at the root), so a repair that rebuilds an instant from the files it finds, and `weir table
check`, see the table as they would without them."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.layout import FOREIGN_DIRS, is_table_path
from lakecore.layout.listing import data_files
from lakecore.services.repair import check_table, repair_lock, run_repair
from lakecore.timeline.store import clear_cache

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


@pytest.mark.parametrize("path,ours", [
    ("00000000_0-0-0_20261122101500123.parquet", True),
    (".00000000_20261122101500123.log.1_0-0-0", True),
    ("dt=2026-11-22/00000000_0-0-0_20261122101500123.parquet", True),
    ("metadata/v3.metadata.json", False),
    ("metadata/deletes/00000000_0-0-0_20261122101500123.parquet", False),
    ("_delta_log/00000000000000000010.checkpoint.parquet", False),
    ("_delta_dv/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", False),
    (".weir/timeline/20261122101500123_20261122101500200.deltacommit", False),
])
def test_a_listing_tells_table_files_from_published_metadata(path, ours):
    assert is_table_path(path) is ours
    assert {"metadata", "_delta_log", "_delta_dv"} <= FOREIGN_DIRS


@pytest.mark.parametrize("partitioned", [False, True])
def test_repair_and_check_of_a_published_table_see_only_its_data_files(tmp_path, partitioned):
    schema = SCHEMA.append(pa.field("dt", pa.string())) if partitioned else SCHEMA
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="id", buckets=2,
                     partition_fields=["dt"] if partitioned else [])
    data = {"id": list(range(10)), "v": [f"v{i}" for i in range(10)]}
    t.upsert(pa.table({**data, **({"dt": ["a"] * 10} if partitioned else {})}, schema=schema))
    t.delete(pa.table({"id": [1], **({"dt": ["a"]} if partitioned else {})}))
    t.publish("iceberg")
    t.publish("delta")
    before = t.read().sort_by("id")
    found = data_files(t.storage)
    listed = {p for files in found.values() for p in files}
    assert listed == {f.path for i in t.timeline().completed for f in t.commit_metadata(i).write_stats}
    assert not check_table(t.storage)

    last = t.timeline().completed[-1]
    path = Path(t.uri, ".weir", "timeline", last.file_name)
    path.write_bytes(path.read_bytes()[:10])  # damaged: repair rebuilds it from the files it lists
    clear_cache()
    report = run_repair(t.storage, repair_lock(t.storage), dry_run=False)
    assert [a.kind for a in report.actions] == ["rebuild_instant"] and not report.remaining
    clear_cache()
    assert Table.open(t.uri).read().sort_by("id").equals(before)
    assert json.loads(path.read_bytes())["write_stats"]
