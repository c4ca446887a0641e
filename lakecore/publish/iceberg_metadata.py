"""Iceberg table metadata (`v<N>.metadata.json`, format v2 or v3) as a value: built from the previous one
and a new snapshot. Pure.

Owns: the partition spec (identity on the Weir partition fields when their types have an exact
Iceberg partition value: strings, integers, dates, booleans; else unpartitioned, and readers prune
by nothing until column statistics exist), the typed partition values of a partition path, which
manifest bucket a file group's entries live in, the snapshot entry (its summary names the Weir
instant it shows; its timestamp is that instant's completion time, so `as of <time>` reads agree
with Weir's), and which snapshots the metadata keeps. Format v3 adds row lineage: each snapshot's
`first-row-id` (the table's `next-row-id` before it) and `added-rows`; a table upgraded from v2
keeps its v2 snapshots as they are (they assign no row ids), as the spec's upgrade does.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

import pyarrow as pa

from lakecore.errors import NotPublishable
from lakecore.layout import parse_partition_path
from lakecore.publish.iceberg_avro import PartitionField
from lakecore.publish.plan import PublishPlan
from lakecore.publish.snapshots import PublishedSnapshot
from lakecore.publish.types import FieldIds
from lakecore.timeline import to_epoch_ms

NAME_MAPPING = "schema.name-mapping.default"
BUCKETS = "weir.manifest-buckets"
INSTANT, COMPLETION, VIEW, SCHEMA = "weir.instant", "weir.completion-time", "weir.view", "weir.schema"
FIRST_PARTITION_ID = 1000
METADATA_LOG = 10  # previous metadata files the metadata lists
VERSIONS = (2, 3)  # the format versions Weir writes


def choose_version(metadata: Mapping[str, Any] | None, asked: int | None, directory: str) -> int:
    """The format version to publish: `asked`, or the published table's (2 for a new one). Raises
    NotPublishable for a version Weir does not write, or a downgrade (the spec has no way back: v3
    readers of the table would find v2 metadata)."""
    current = int(metadata["format-version"]) if metadata else None
    version = asked if asked is not None else current or 2
    if version not in VERSIONS:
        raise NotPublishable(f"Iceberg format version {version} is not one Weir publishes; use 2 or 3")
    if current is not None and version < current:
        where = (metadata or {}).get("location")
        raise NotPublishable(
            f"the Iceberg table at {where} is published as format version {current}, which cannot go back "
            f"to {version}; publish it as version {current}, or delete its {directory}/ directory (metadata "
            "only: Weir's data stays; drop the table from its catalog too, if registered) and the next "
            f"publish writes version {version} from scratch, without the older snapshots")
    return version


def _partition_type(t: pa.DataType) -> str | dict[str, Any] | None:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_integer(t) and not pa.types.is_uint64(t):
        signed_bits = t.bit_width + (1 if pa.types.is_unsigned_integer(t) else 0)
        return "int" if signed_bits <= 32 else "long"
    return None


def partitioned(schema: pa.Schema, fields: Sequence[str]) -> bool:
    """Whether the partition fields get an identity partition spec (else: unpartitioned)."""
    return bool(fields) and all(_partition_type(schema.field(f).type) is not None for f in fields)


def partition_spec(schema: pa.Schema, fields: Sequence[str], ids: FieldIds
                   ) -> tuple[dict[str, Any], list[PartitionField]]:
    if not partitioned(schema, fields):
        return {"spec-id": 0, "fields": []}, []
    avro = [PartitionField(f, _partition_type(schema.field(f).type) or "string", FIRST_PARTITION_ID + i)
            for i, f in enumerate(fields)]
    spec = [{"name": f, "transform": "identity", "source-id": ids.of((f,)), "field-id": p.field_id}
            for f, p in zip(fields, avro, strict=True)]
    return {"spec-id": 0, "fields": spec}, avro


def partition_record(partition: str, spec: Sequence[PartitionField]) -> dict[str, Any]:
    """The partition tuple of a file in partition path `partition`, typed as the spec says."""
    values = parse_partition_path(partition)
    out: dict[str, Any] = {}
    for p in spec:
        raw = values[p.name]
        if p.avro_type == "string":
            out[p.name] = raw
        elif p.avro_type == "boolean":
            out[p.name] = raw == "true"
        elif isinstance(p.avro_type, dict):
            out[p.name] = date.fromisoformat(raw)
        else:
            out[p.name] = int(raw)
    return out


def bucket_of(partition: str, file_id: str, buckets: int) -> int:
    """The manifest a file group's entries live in: stable for a table's life (a full rebuild may
    choose a new bucket count), so an incremental publish rewrites only the manifests it touches."""
    return zlib.crc32(f"{partition}/{file_id}".encode()) % buckets


def buckets_for(files: int) -> int:
    """About 500 entries per manifest: a publish rewrites a few small manifests, a reader opens few."""
    return max(1, min(1024, -(-files // 500)))


def published_snapshots(metadata: Mapping[str, Any]) -> list[PublishedSnapshot]:
    """The snapshots that name a Weir instant, oldest first."""
    out = []
    for s in sorted(metadata.get("snapshots") or (), key=lambda s: s["sequence-number"]):
        summary = s.get("summary") or {}
        if INSTANT in summary and COMPLETION in summary:
            out.append(PublishedSnapshot(summary[INSTANT], summary[COMPLETION], summary.get(VIEW, "snapshot"),
                                         int(s["snapshot-id"]), summary.get(SCHEMA, "")))
    return out


def current_snapshot(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    current = metadata.get("current-snapshot-id")
    for s in metadata.get("snapshots") or ():
        if s["snapshot-id"] == current:
            return dict(s)
    return None


def snapshot_entry(snapshot_id: int, parent: int | None, sequence: int, plan: PublishPlan, manifest_list: str,
                   totals: Mapping[str, int], row_ids: tuple[int, int] | None = None) -> dict[str, Any]:
    """The snapshot's entry (its schema id is set by `table_metadata`); `row_ids`: (first-row-id,
    added-rows) of a v3 snapshot."""
    completion = plan.instant.completion_time or ""
    summary = {"operation": "overwrite", INSTANT: plan.instant.requested_time, COMPLETION: completion,
               VIEW: plan.view, SCHEMA: plan.fingerprint, "weir.action": plan.instant.action,
               **{k: str(v) for k, v in totals.items()}}
    entry: dict[str, Any] = {"snapshot-id": snapshot_id, "sequence-number": sequence,
                             "timestamp-ms": to_epoch_ms(completion), "summary": summary,
                             "manifest-list": manifest_list, "schema-id": 0}
    if parent is not None:
        entry["parent-snapshot-id"] = parent
    if row_ids is not None:
        entry["first-row-id"], entry["added-rows"] = row_ids
    return entry


def next_row_id(metadata: Mapping[str, Any] | None) -> int:
    """The first row id the next snapshot assigns (0 in a new or upgraded table)."""
    return int((metadata or {}).get("next-row-id", 0))


def table_metadata(previous: Mapping[str, Any] | None, *, table_uuid: str, location: str,
                   schema: dict[str, Any], last_column: int, mapping: list[dict[str, Any]],
                   spec: dict[str, Any], snapshot: dict[str, Any], keep: set[int], buckets: int,
                   previous_file: str | None,
                   now_ms: int, properties: Mapping[str, str], version: int = 2) -> dict[str, Any]:
    """The next metadata (format `version`): `snapshot` current, the snapshots whose ids are in `keep`
    retained."""
    prev = dict(previous or {})
    schemas = [dict(s) for s in prev.get("schemas") or ()]
    same = next((s for s in schemas if s["fields"] == schema["fields"]), None)
    if same is None:
        schema = {**schema, "schema-id": max([-1, *(s["schema-id"] for s in schemas)]) + 1}
        schemas.append(schema)
    schema_id = same["schema-id"] if same is not None else schema["schema-id"]
    snapshot = {**snapshot, "schema-id": schema_id}
    snapshots = [s for s in prev.get("snapshots") or () if s["snapshot-id"] in keep] + [snapshot]
    kept_ids = {s["snapshot-id"] for s in snapshots}
    log = [e for e in prev.get("snapshot-log") or () if e["snapshot-id"] in kept_ids]
    log.append({"timestamp-ms": snapshot["timestamp-ms"], "snapshot-id": snapshot["snapshot-id"]})
    metadata_log = list(prev.get("metadata-log") or ())
    if previous_file is not None and previous:
        metadata_log.append({"timestamp-ms": prev["last-updated-ms"], "metadata-file": previous_file})
    props = {**dict(prev.get("properties") or {}), **properties, NAME_MAPPING: json.dumps(mapping),
             BUCKETS: str(buckets)}
    lineage = {"next-row-id": snapshot["first-row-id"] + snapshot["added-rows"]} if version >= 3 else {}
    return {
        "format-version": version, **lineage, "table-uuid": table_uuid, "location": location,
        "last-sequence-number": snapshot["sequence-number"], "last-updated-ms": now_ms,
        "last-column-id": last_column, "current-schema-id": schema_id, "schemas": schemas,
        "default-spec-id": spec["spec-id"], "partition-specs": [spec],
        "last-partition-id": max([FIRST_PARTITION_ID - 1, *(f["field-id"] for f in spec["fields"])]),
        "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": props, "current-snapshot-id": snapshot["snapshot-id"],
        "refs": {"main": {"snapshot-id": snapshot["snapshot-id"], "type": "branch"}},
        "snapshots": snapshots, "snapshot-log": log, "metadata-log": metadata_log[-METADATA_LOG:],
    }
