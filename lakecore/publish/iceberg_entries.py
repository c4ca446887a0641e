"""The entries of a published Iceberg snapshot's manifests, as values: which file group an entry
belongs to, which bucket a manifest holds, which delete files a fold keeps, the manifest-list record
of a manifest and the snapshot's totals.

Pure: takes decoded entries and manifest-list records, returns values (the paths it drops come back to
the caller, which retires them); reading and writing the files is `iceberg_manifests`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from lakecore.layout import parse_data_file_name
from lakecore.publish import iceberg_avro as avro
from lakecore.publish.plan import GroupKey

FOLD_AFTER = 16  # appended data manifests that make the next publish fold them into their buckets
APPENDED = -1  # the "bucket" of an appended manifest
_BUCKET = re.compile(r"-m(\d+)-(data|deletes)\.avro$")

Entries = dict[tuple[int, int], list[dict[str, Any]]]  # manifest entries by (bucket, content)


def bucket(m: Mapping[str, Any]) -> int:
    """The bucket a manifest-list record's manifest holds (APPENDED: an incremental publish's)."""
    found = _BUCKET.search(m["manifest_path"])
    return int(found.group(1)) if found else APPENDED


def relative(uri: str, location: str) -> str:
    return uri[len(location) + 1:] if uri.startswith(location + "/") else uri


def group_of(data_file: Mapping[str, Any], location: str) -> GroupKey:
    """The file group an entry belongs to; a full rebuild's delete file of a partition belongs to none
    (a key of its own: never dropped with a group, as its rows of files that left the view hide nothing)."""
    if data_file["content"] and data_file["referenced_data_file"] is None:
        return "", data_file["file_path"]
    path = data_file["referenced_data_file"] if data_file["content"] else data_file["file_path"]
    partition, _, name = relative(path, location).rpartition("/")
    parsed = parse_data_file_name(name)
    return partition, parsed.file_id if parsed else name


def partition_of(data_file: Mapping[str, Any], location: str) -> str:
    """The partition path of a delete file's data files: its referenced one's, or its lowest one's."""
    path = data_file["referenced_data_file"]
    if path is None:
        low = [b["value"] for b in data_file["lower_bounds"] or () if b["key"] == avro.FILE_PATH_ID]
        path = low[0].decode() if low else data_file["file_path"]
    return relative(path, location).rpartition("/")[0]


def without(entries: list[dict[str, Any]], groups: frozenset[GroupKey], location: str
            ) -> tuple[list[dict[str, Any]], list[str]]:
    """`entries` but those of `groups`, and the delete files of the dropped ones (to retire)."""
    if not groups:
        return entries, []
    kept, dropped = [], []
    for e in entries:
        if group_of(e["data_file"], location) not in groups:
            kept.append(e)
        elif e["data_file"]["content"] == avro.POSITION_DELETES:
            dropped.append(e["data_file"]["file_path"])
    return kept, dropped


def newest_deletes(entries: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Per data file, its newest delete file only (each holds every row of it hidden at the time, and a
    row once hidden stays hidden in its slice), and the older ones (to retire)."""
    newest: dict[str, dict[str, Any]] = {}
    for e in entries:
        ref = e["data_file"]["referenced_data_file"]
        if ref is None:
            continue  # a partition's delete file: kept (a newer one of a data file repeats its rows)
        if ref not in newest or e["sequence_number"] > newest[ref]["sequence_number"]:
            newest[ref] = e
    keep = {id(e) for e in newest.values()}
    drop = [e for e in entries if e["data_file"]["referenced_data_file"] is not None and id(e) not in keep]
    gone = {id(e) for e in drop}
    return [e for e in entries if id(e) not in gone], [e["data_file"]["file_path"] for e in drop]


def manifest_file(path: str, length: int, spec_id: int, content: int, snapshot_id: int, sequence: int,
                  entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The manifest list's record of the manifest at `path` (`length` bytes) holding `entries`."""
    added = [e for e in entries if e["status"] == avro.ADDED]
    existing = [e for e in entries if e["status"] == avro.EXISTING]
    return {"manifest_path": path, "manifest_length": length,
            "partition_spec_id": spec_id, "content": content, "sequence_number": sequence,
            "min_sequence_number": min(e["sequence_number"] for e in entries),
            "added_snapshot_id": snapshot_id, "added_files_count": len(added),
            "existing_files_count": len(existing), "deleted_files_count": 0,
            "added_rows_count": sum(e["data_file"]["record_count"] for e in added),
            "existing_rows_count": sum(e["data_file"]["record_count"] for e in existing),
            "deleted_rows_count": 0, "partitions": None, "key_metadata": None}


def totals(manifests: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """The snapshot summary's file and row totals of the manifest list `manifests`."""
    data = [m for m in manifests if m["content"] == avro.DATA]
    deletes = [m for m in manifests if m["content"] == avro.POSITION_DELETES]

    def files(ms: list[Mapping[str, Any]]) -> int:
        return sum(m["added_files_count"] + m["existing_files_count"] for m in ms)

    def rows(ms: list[Mapping[str, Any]]) -> int:
        return sum(m["added_rows_count"] + m["existing_rows_count"] for m in ms)

    return {"total-data-files": files(data), "total-delete-files": files(deletes),
            "total-records": rows(data), "total-position-deletes": rows(deletes)}
