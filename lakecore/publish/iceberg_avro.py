"""Iceberg's Avro files, format v2: manifests (one entry per data or delete file) and manifest lists
(one entry per manifest), written and read with fastavro. Pure except for fastavro's encoding of
bytes in memory; the caller stores them.

The schemas are the Iceberg spec's, with its field ids (readers such as pyiceberg resolve fields by
id) and its record names (`manifest_entry`, `r2`, `r102`, `manifest_file`, `r508`, as the Java
implementation writes them). Only what Weir fills is set: column statistics of data files (from the
write stats, `bounds.py`), `lower_bounds`/`upper_bounds` of `file_path` on position-delete files (so a reader
applies each to its one data file), and `referenced_data_file` on them too.
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


def manifest_entry_schema(partition: Sequence[PartitionField]) -> dict[str, Any]:
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
        {"name": "referenced_data_file", "type": _opt("string"), "default": None, "field-id": 143},
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

MANIFEST_LIST_SCHEMA: dict[str, Any] = {"type": "record", "name": "manifest_file", "fields": [
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
]}


def entry(status: int, snapshot_id: int, sequence: int, content: int, path: str, partition: Mapping[str, Any],
          rows: int, size: int, *, referenced: str | None = None,
          path_bounds: tuple[str, str] | None = None, metrics: Mapping[str, Any] | None = None
          ) -> dict[str, Any]:
    """A manifest entry (`sequence` is both the data and the file sequence number); `metrics`: the
    column statistics fields (`bounds.iceberg_metrics`)."""
    data_file: dict[str, Any] = {
        "content": content, "file_path": path, "file_format": "PARQUET", "partition": dict(partition),
        "record_count": rows, "file_size_in_bytes": size, "column_sizes": None, "value_counts": None,
        "null_value_counts": None, "nan_value_counts": None, "lower_bounds": None, "upper_bounds": None,
        "key_metadata": None, "split_offsets": None, "equality_ids": None, "sort_order_id": None,
        "referenced_data_file": referenced}
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
                      content: int) -> dict[str, str]:
    return {"schema": json.dumps(table_schema), "schema-id": str(table_schema.get("schema-id", 0)),
            "partition-spec": json.dumps(spec["fields"]), "partition-spec-id": str(spec["spec-id"]),
            "format-version": "2", "content": "data" if content == DATA else "deletes"}


def list_metadata(snapshot_id: int, parent: int | None, sequence: int) -> dict[str, str]:
    return {"snapshot-id": str(snapshot_id), "parent-snapshot-id": str(parent) if parent else "null",
            "sequence-number": str(sequence), "format-version": "2"}
