"""The real operator on a real API server changes the Parquet codec of an existing table when its
LakeTable's spec.compression changes (Event CompressionChanged): the next write's files use the new codec
(read from their Parquet footers), the files written before keep theirs, and every row reads as before."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.table import WriteResult
from tests.lakecore.table.test_a_tables_codec_is_checked_and_changes_for_new_files import codecs
from tests.lakeoperator.kube.manifests import table
from tests.support.operator import Cluster, wait_until

pytestmark = pytest.mark.k8s
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.int64()), ("ts", pa.int64())])


def upsert(location: str, ids: list[int]) -> tuple[Table, WriteResult]:
    t = Table.open(location)
    return t, t.upsert(pa.table({"id": ids, "amount": ids, "ts": [1] * len(ids)}, schema=SCHEMA))


def test_a_spec_edit_changes_the_codec_of_the_next_writes_files(cluster: Cluster) -> None:
    location = str(cluster.work / "lake" / "orders")
    cluster.apply(table(cluster.work))   # no spec.compression: the CRD's default, zstd
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)
    t, before = upsert(location, [1, 2])
    assert codecs(t, before) == {"ZSTD"}

    cluster.patch("LakeTable", "orders", {"spec": {"compression": "lz4"}})
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("observedGeneration") == 2
                        and s.get("phase") == "Ready", timeout=30)
    assert Table.open(location).config.compression == "lz4"
    wait_until(lambda: any(e["reason"] == "CompressionChanged" and "use lz4 (was zstd)" in e["message"]
                           for e in cluster.events("orders")), timeout=10,   # posted after the status
               show=lambda: cluster.events("orders"))

    t, after = upsert(location, [2, 3])
    assert codecs(t, after) == {"LZ4"} and codecs(t, before) == {"ZSTD"}
    assert sorted(Table.open(location).read().column("id").to_pylist()) == [1, 2, 3]
