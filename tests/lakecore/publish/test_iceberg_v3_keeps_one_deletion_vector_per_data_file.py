"""Iceberg v3 publishing over random write histories (incremental publishes, folds, compaction,
clustering, clean, archival): after every step the snapshot lists at most one deletion vector per data
file, each a `deletion-vector-v1` blob exactly where its manifest entry says (pyiceberg's Puffin reader
agrees), naming a data file the snapshot lists, holding the rows Weir hides; pyiceberg reads exactly
`Table.read()`; no position-delete file is added; and row lineage holds (data manifests carry
`first_row_id`, `next-row-id` = `first-row-id` + `added-rows`, a data file keeps its row ids while it
stays listed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
from pyiceberg.table.puffin import PuffinFile

from lakecore.publish import iceberg
from tests.lakecore.publish import readers
from tests.lakecore.publish.histories import history, step, table_kind


def avro(path: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        meta = {k: v.decode() if isinstance(v, bytes) else v for k, v in reader.metadata.items()}
        return list(reader), meta


def snapshot_files(base: str) -> tuple[dict[str, Any], dict[str, int], list[dict[str, Any]]]:
    """(the current metadata, each listed data file's first row id, the DV entries)."""
    metadata = json.loads(Path(readers.iceberg_metadata(base)).read_text())
    assert metadata["format-version"] == 3
    current = next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])
    assert metadata["next-row-id"] == current["first-row-id"] + current["added-rows"]
    manifests, meta = avro(current["manifest-list"])
    assert meta["format-version"] == "3"
    rows: dict[str, int] = {}
    dvs: list[dict[str, Any]] = []
    for m in manifests:
        entries, meta = avro(m["manifest_path"])
        assert meta["format-version"] == "3"
        if m["content"] == 0:
            assert m["first_row_id"] is not None, "every data manifest is given row ids"
            first = m["first_row_id"]
            for e in entries:
                own = e["data_file"]["first_row_id"]
                rows[e["data_file"]["file_path"]] = own if own is not None else first
                first += 0 if own is not None else e["data_file"]["record_count"]
        else:
            assert m["first_row_id"] is None
            dvs.extend(e["data_file"] for e in entries)
    return metadata, rows, dvs


def check_dvs(base: str, listed: dict[str, int], dvs: list[dict[str, Any]]) -> None:
    referenced = [d["referenced_data_file"] for d in dvs]
    assert len(referenced) == len(set(referenced)), "at most one deletion vector per data file"
    assert set(referenced) <= set(listed), "a vector applies to a listed data file"
    for d in dvs:
        assert d["file_format"] == "PUFFIN" and d["file_path"].endswith(".puffin")
        puffin = PuffinFile(Path(d["file_path"]).read_bytes())
        (blob,) = puffin.footer.blobs
        assert blob.type == "deletion-vector-v1" and blob.snapshot_id == blob.sequence_number == -1
        assert (blob.offset, blob.length) == (d["content_offset"], d["content_size_in_bytes"])
        assert blob.properties["referenced-data-file"] == d["referenced_data_file"]
        (vector,) = deletion_vectors_from_puffin_file(puffin)
        assert len(vector.to_vector()) == d["record_count"] == int(blob.properties["cardinality"]) > 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_kind, st.lists(step, min_size=1, max_size=7))
# a log of deletes only never shows a row, so it is never listed: once a later publish sees it emptied,
# no vector may name it
@example({"table_type": "merge_on_read", "ordering_field": None, "partition_fields": []},
         [("delete", [(0, None)]), ("delete", [(0, None)])])
def test_a_v3_snapshot_holds_one_vector_per_data_file_and_stable_row_ids(kind, steps):
    with history(kind) as h:
        seen: dict[str, int] = {}
        for op in h.run(steps):
            h.table.publish("iceberg", format_version=3)
            _, listed, dvs = snapshot_files(h.table.uri)
            check_dvs(h.table.uri, listed, dvs)
            for path, first in listed.items():
                assert seen.setdefault(path, first) == first, f"{path} kept its row ids after {op}"
            got = readers.iceberg(h.table.uri)
            readers.assert_same(got, readers.expected(h.table.read(), "iceberg"), ["k"],
                                reader=f"pyiceberg v3 after {op}")


def test_many_incremental_v3_publishes_fold_and_still_read_right(tmp_path):
    """More incremental publishes than FOLD_AFTER: the appended manifests are folded into their
    buckets, each data file still with one vector at most."""
    import pyarrow as pa

    from lakecore import Table

    schema = pa.schema([("k", pa.int64()), ("ts", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="k", ordering_field="ts", buckets=2,
                     table_type="merge_on_read")
    t.upsert(pa.table({"k": list(range(40)), "ts": [0] * 40}, schema=schema))
    for i in range(iceberg.FOLD_AFTER + 3):
        t.upsert(pa.table({"k": [i, i + 1, 39 - i], "ts": [i + 1] * 3}, schema=schema))
        assert not t.publish("iceberg", format_version=3).full or i == 0
        _, listed, dvs = snapshot_files(t.uri)
        check_dvs(t.uri, listed, dvs)
        readers.assert_same(readers.iceberg(t.uri), readers.expected(t.read(), "iceberg"), ["k"],
                            reader=f"pyiceberg v3 after publish {i}")
    metadata, _, _ = snapshot_files(t.uri)
    current = next(s for s in metadata["snapshots"] if s["snapshot-id"] == metadata["current-snapshot-id"])
    appended = [m for m in avro(current["manifest-list"])[0] if "-a-" in m["manifest_path"]]
    assert len(appended) < iceberg.FOLD_AFTER, "the appended manifests were folded into their buckets"
