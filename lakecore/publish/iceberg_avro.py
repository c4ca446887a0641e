"""Iceberg's Avro files, format v2 or v3: manifests (one entry per data or delete file) and manifest lists
(one entry per manifest), written and read with fastavro. Pure except for fastavro's encoding of
bytes in memory; the caller stores them.

The schemas are the Iceberg spec's, with its field ids (readers such as pyiceberg resolve fields by
id) and its record names (`manifest_entry`, `r2`, `r102`, `manifest_file`, `r508`, as the Java
implementation writes them). Only what Weir fills is set: column statistics of data files (from the
write stats, `bounds.py`), `lower_bounds`/`upper_bounds` of `file_path` on position-delete files (so a reader
applies each to its one data file), and `referenced_data_file` on them too. Format v3 adds a data
file's `first_row_id` (row lineage: null for a new file, inherited from its manifest's) and a
deletion vector's `content_offset`/`content_size_in_bytes` (where its blob is in its Puffin file).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

FILE_PATH_ID = 2147483546  # reserved ids of a position-delete file's columns
POS_ID = 2147483545
DATA, POSITION_DELETES = 0, 1           # data_file.content
ADDED, EXISTING, DELETED = 1, 0, 2      # manifest_entry.status


def _opt(avro_type: Any) -> list[Any]:
    return ["null", avro_type]


def _map(field_id: int, key_id: int, value_id: int, name: str, value: str) -> dict[str, Any]:
    record = {"type": "record", "name": f"k{key_id}_v{value_id}",
              "fields": [{"name": "key", "type": "int", "field-id": key_id},
                         {"name": "value", "type": value, "field-id": value_id}]}
    return {"name": name, "type": _opt({"type": "array", "items": record, "logicalType": "map"}),
            "default": None, "field-id": field_id}


@dataclass(frozen=True)
class PartitionField:
    name: str
    avro_type: str | dict[str, Any]  # "int", "long", "string", "boolean" or a date
    field_id: int                     # 1000, 1001, ...


def manifest_entry_schema(partition: Sequence[PartitionField], version: int = 2) -> dict[str, Any]:
    part = {"type": "record", "name": "r102",
            "fields": [{"name": p.name, "type": _opt(p.avro_type), "default": None, "field-id": p.field_id}
                       for p in partition]}
    data_file = {"type": "record", "name": "r2", "fields": [
        {"name": "content", "type": "int", "field-id": 134},
        {"name": "file_path", "type": "string", "field-id": 100},
        {"name": "file_format", "type": "string", "field-id": 101},
        {"name": "partition", "type": part, "field-id": 102},
        {"name": "record_count", "type": "long", "field-id": 103},
        {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
        _map(108, 117, 118, "column_sizes", "long"),
        _map(109, 119, 120, "value_counts", "long"),
        _map(110, 121, 122, "null_value_counts", "long"),
        _map(137, 138, 139, "nan_value_counts", "long"),
        _map(125, 126, 127, "lower_bounds", "bytes"),
        _map(128, 129, 130, "upper_bounds", "bytes"),
        {"name": "key_metadata", "type": _opt("bytes"), "default": None, "field-id": 131},
        {"name": "split_offsets", "type": _opt({"type": "array", "items": "long", "element-id": 133}),
         "default": None, "field-id": 132},
        {"name": "equality_ids", "type": _opt({"type": "array", "items": "int", "element-id": 136}),
         "default": None, "field-id": 135},
        {"name": "sort_order_id", "type": _opt("int"), "default": None, "field-id": 140},
        *([{"name": "first_row_id", "type": _opt("long"), "default": None, "field-id": 142}]
          if version >= 3 else []),
        {"name": "referenced_data_file", "type": _opt("string"), "default": None, "field-id": 143},
        *([{"name": "content_offset", "type": _opt("long"), "default": None, "field-id": 144},
           {"name": "content_size_in_bytes", "type": _opt("long"), "default": None, "field-id": 145}]
          if version >= 3 else []),
    ]}
    return {"type": "record", "name": "manifest_entry", "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        {"name": "snapshot_id", "type": _opt("long"), "default": None, "field-id": 1},
        {"name": "sequence_number", "type": _opt("long"), "default": None, "field-id": 3},
        {"name": "file_sequence_number", "type": _opt("long"), "default": None, "field-id": 4},
        {"name": "data_file", "type": data_file, "field-id": 2},
    ]}


_SUMMARY = {"type": "record", "name": "r508", "fields": [
    {"name": "contains_null", "type": "boolean", "field-id": 509},
    {"name": "contains_nan", "type": _opt("boolean"), "default": None, "field-id": 518},
    {"name": "lower_bound", "type": _opt("bytes"), "default": None, "field-id": 510},
    {"name": "upper_bound", "type": _opt("bytes"), "default": None, "field-id": 511},
]}

_MANIFEST_LIST_FIELDS: list[dict[str, Any]] = [
    {"name": "manifest_path", "type": "string", "field-id": 500},
    {"name": "manifest_length", "type": "long", "field-id": 501},
    {"name": "partition_spec_id", "type": "int", "field-id": 502},
    {"name": "content", "type": "int", "field-id": 517},
    {"name": "sequence_number", "type": "long", "field-id": 515},
    {"name": "min_sequence_number", "type": "long", "field-id": 516},
    {"name": "added_snapshot_id", "type": "long", "field-id": 503},
    {"name": "added_files_count", "type": "int", "field-id": 504},
    {"name": "existing_files_count", "type": "int", "field-id": 505},
    {"name": "deleted_files_count", "type": "int", "field-id": 506},
    {"name": "added_rows_count", "type": "long", "field-id": 512},
    {"name": "existing_rows_count", "type": "long", "field-id": 513},
    {"name": "deleted_rows_count", "type": "long", "field-id": 514},
    {"name": "partitions", "type": _opt({"type": "array", "items": _SUMMARY, "element-id": 508}),
     "default": None, "field-id": 507},
    {"name": "key_metadata", "type": _opt("bytes"), "default": None, "field-id": 519},
]


def manifest_list_schema(version: int = 2) -> dict[str, Any]:
    lineage = [{"name": "first_row_id", "type": _opt("long"), "default": None, "field-id": 520}]
    return {"type": "record", "name": "manifest_file",
            "fields": [*_MANIFEST_LIST_FIELDS, *(lineage if version >= 3 else [])]}


def entry(status: int, snapshot_id: int, sequence: int, content: int, path: str, partition: Mapping[str, Any],
          rows: int, size: int, *, referenced: str | None = None,
          path_bounds: tuple[str, str] | None = None, metrics: Mapping[str, Any] | None = None,
          blob: tuple[int, int] | None = None) -> dict[str, Any]:
    """A manifest entry (`sequence` is both the data and the file sequence number); `metrics`: the
    column statistics fields (`bounds.iceberg_metrics`); `blob`: (offset, length) of a deletion
    vector in its Puffin file (format v3)."""
    data_file: dict[str, Any] = {
        "content": content, "file_path": path, "file_format": "PARQUET" if blob is None else "PUFFIN",
        "partition": dict(partition),
        "record_count": rows, "file_size_in_bytes": size, "column_sizes": None, "value_counts": None,
        "null_value_counts": None, "nan_value_counts": None, "lower_bounds": None, "upper_bounds": None,
        "key_metadata": None, "split_offsets": None, "equality_ids": None, "sort_order_id": None,
        "referenced_data_file": referenced, "first_row_id": None,
        "content_offset": blob[0] if blob else None, "content_size_in_bytes": blob[1] if blob else None}
    if metrics:
        data_file.update(metrics)
    if referenced is not None or path_bounds is not None:
        low, high = path_bounds or (referenced or "", referenced or "")
        data_file["lower_bounds"] = [{"key": FILE_PATH_ID, "value": low.encode()}]
        data_file["upper_bounds"] = [{"key": FILE_PATH_ID, "value": high.encode()}]
    return {"status": status, "snapshot_id": snapshot_id, "sequence_number": sequence,
            "file_sequence_number": sequence, "data_file": data_file}


def encode(schema: Mapping[str, Any], records: Iterable[Mapping[str, Any]],
           metadata: Mapping[str, str]) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(dict(schema)), records, metadata=dict(metadata),
                    codec="deflate")
    return out.getvalue()


def decode(data: bytes) -> list[dict[str, Any]]:
    return list(fastavro.reader(io.BytesIO(data)))  # type: ignore[arg-type]


def manifest_metadata(table_schema: Mapping[str, Any], spec: Mapping[str, Any],
                      content: int, version: int = 2) -> dict[str, str]:
    return {"schema": json.dumps(table_schema), "schema-id": str(table_schema.get("schema-id", 0)),
            "partition-spec": json.dumps(spec["fields"]), "partition-spec-id": str(spec["spec-id"]),
            "format-version": str(version), "content": "data" if content == DATA else "deletes"}


def list_metadata(snapshot_id: int, parent: int | None, sequence: int, version: int = 2,
                  first_row_id: int | None = None) -> dict[str, str]:
    lineage = {"first-row-id": str(first_row_id)} if first_row_id is not None else {}
    return {"snapshot-id": str(snapshot_id), "parent-snapshot-id": str(parent) if parent else "null",
            "sequence-number": str(sequence), "format-version": str(version), **lineage}


def with_inherited_row_ids(manifest: Mapping[str, Any], entries: list[dict[str, Any]]
                           ) -> list[dict[str, Any]]:
    """A v3 data manifest's entries with each data file's `first_row_id` as readers inherit it (the
    manifest's plus the rows of the files before it that had none), to be written when an entry is
    carried into a new manifest, so row ids never change."""
    first = manifest.get("first_row_id")
    if first is None or manifest["content"] != DATA:
        return entries
    out = []
    for e in entries:
        if e["data_file"].get("first_row_id") is None:
            e = {**e, "data_file": {**e["data_file"], "first_row_id": first}}
            first += e["data_file"]["record_count"]
        out.append(e)
    return out


def assign_row_ids(manifests: list[dict[str, Any]], first_row_id: int) -> tuple[list[dict[str, Any]], int]:
    """(the manifest list's entries, each data manifest without a `first_row_id` given one from
    `first_row_id` on; the row ids assigned, the snapshot's `added-rows`)."""
    out, next_id = [], first_row_id
    for m in manifests:
        if m["content"] == DATA and m.get("first_row_id") is None:
            m = {**m, "first_row_id": next_id}
            next_id += m["added_rows_count"] + m["existing_rows_count"]
        out.append(m)
    return out, next_id - first_row_id
