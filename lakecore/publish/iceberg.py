"""Iceberg (format v2, or v3 with deletion vectors) metadata beside a Weir table, over its Parquet files
as they are.

The table location is the Weir table's base; the metadata sits where Hadoop-style readers look for it
(`iceberg_scan('<base>')`, Spark's `load('<base>')`), or a catalog registers `v<N>.metadata.json`:

    <base>/metadata/v<N>.metadata.json          one per publish, created only if absent: the commit
    <base>/metadata/version-hint.text           N, replaced after the commit (a hint: readers and the
                                                next publish also probe v<N+1>)
    <base>/metadata/snap-<id>-<uuid>.avro       manifest list
    <base>/metadata/<uuid>-m<b>-data.avro       manifest of bucket b's data files ("-deletes": delete files)
    <base>/metadata/<uuid>-a-data.avro          manifest of the entries one incremental publish added
    <base>/metadata/deletes/<uuid>.parquet      position deletes (file_path, pos) of one data file, or (a
                                                full rebuild, a fold) of every data file of one partition
    <base>/metadata/deletes/<uuid>.puffin       (v3) the deletion vector of one data file (`iceberg_dvs`)
    <base>/metadata/retired-<id>.json           files snapshot <id> stopped referencing (deleted once
                                                every older snapshot expired)

Publishing writes everything new first and the metadata file last, so a crash at any point leaves the
previous snapshot current (and unreferenced files, which are never read); a publisher that loses the
race for v<N+1> deletes its files and raises PublishConflict. Files only expired snapshots read are
deleted after that (`expire`), once a catalog no longer points at one of them.

Which manifests a publish writes (incremental: the previous ones carried over, new entries appended,
folded back into their buckets now and then) is `iceberg_manifests`'s; the decisions over their
entries are `iceberg_entries`'s. This module loads and commits: the manifest list, the retired list
and the metadata file around them, and `expire`.

Format v3 (`version=3`) hides rows with one deletion vector per data file instead (`iceberg_dvs`).
Row lineage: new data manifests get row ids from the table's `next-row-id`; a data file carried into a
rewritten manifest keeps the ones it inherited. A table published as v2 is upgraded by a full rebuild
(its v2 snapshots stay readable for time travel); v3 is never downgraded (`check_version`).
"""

from __future__ import annotations

import json
import re
import secrets
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakecore.errors import AlreadyExists, PublishConflict
from lakecore.publish import iceberg_avro as avro
from lakecore.publish import iceberg_metadata as im
from lakecore.publish.bounds import iceberg_columns
from lakecore.publish.iceberg_entries import FOLD_AFTER as FOLD_AFTER  # re-exported: publishes before a fold
from lakecore.publish.iceberg_entries import relative, totals
from lakecore.publish.iceberg_manifests import METADATA_DIR, Snapshot, manifests
from lakecore.publish.plan import PublishPlan
from lakecore.publish.snapshots import PublishedSnapshot, Retention, retained
from lakecore.publish.types import FieldIds, iceberg_schema, ids_of, name_mapping
from lakecore.storage import Storage
from lakecore.timeline import now_ms

HINT = f"{METADATA_DIR}/version-hint.text"
_VERSION = re.compile(r"^v(\d+)\.metadata\.json$")


def metadata_path(version: int) -> str:
    return f"{METADATA_DIR}/v{version}.metadata.json"


@dataclass(frozen=True)
class IcebergState:
    version: int                         # N of the newest metadata file (0: none)
    metadata: dict[str, Any] | None      # None: absent, or it does not parse (a full rebuild follows)

    @property
    def snapshots(self) -> list[PublishedSnapshot]:
        return im.published_snapshots(self.metadata) if self.metadata else []


def load(storage: Storage) -> IcebergState:
    """The newest committed metadata: the hint's version, then any newer one a crash left unhinted."""
    hint = _hint(storage)
    version = hint if hint is not None else _listed(storage)
    while storage.exists(metadata_path(version + 1)):
        version += 1
    if version == 0:
        return IcebergState(0, None)
    try:
        metadata = json.loads(storage.read(metadata_path(version)))
        if not isinstance(metadata, dict) or metadata.get("format-version") not in im.VERSIONS:
            raise ValueError("not format-version 2 or 3 table metadata")
    except (FileNotFoundError, UnicodeDecodeError, ValueError):
        return IcebergState(version, None)
    if hint != version:  # a publish died between its commit and the hint: finish it
        storage.write(HINT, str(version).encode())
    return IcebergState(version, metadata)


def _hint(storage: Storage) -> int | None:
    try:
        return int(storage.read(HINT).decode().strip())
    except (FileNotFoundError, UnicodeDecodeError, ValueError):
        return None


def _listed(storage: Storage) -> int:
    found = [int(m.group(1)) for n in storage.list_names(METADATA_DIR) if (m := _VERSION.match(n))]
    return max(found, default=0)


def location(storage: Storage) -> str:
    """The metadata file readers open (a catalog registers it; Hadoop-style readers find it by the hint)."""
    return f"{storage.uri.rstrip('/')}/{metadata_path(load(storage).version)}"


def check_schema(schema: pa.Schema) -> None:
    """Raise NotPublishable for a column type Iceberg v2 cannot hold."""
    iceberg_schema(schema, FieldIds())


def format_version(state: IcebergState, asked: int | None) -> int:
    """The format version to publish (`iceberg_metadata.choose_version`), before anything is written."""
    return im.choose_version(state.metadata, asked, METADATA_DIR)


def can_continue(state: IcebergState, location: str, version: int = 2) -> bool:
    """Whether an incremental publish of format `version` can build on the current snapshot."""
    md = state.metadata
    return bool(md and md.get("location") == location and im.current_snapshot(md) and
                im.BUCKETS in (md.get("properties") or {}) and md.get("format-version") == version)


def shows_version(state: IcebergState, version: int) -> bool:
    return bool(state.metadata) and (state.metadata or {}).get("format-version") == version


def commit(storage: Storage, plan: PublishPlan, state: IcebergState,
           retention: Retention, version: int = 2) -> PublishedSnapshot:
    """Write the snapshot `plan` describes as the table's current one, in format `version` (see the
    module docstring)."""
    location = storage.uri.rstrip("/")
    if state.metadata is not None and state.metadata.get("location") != location:
        state = IcebergState(state.version, None)  # copied or moved here: its snapshots read files elsewhere
    prev = state.metadata
    props = (prev or {}).get("properties") or {}
    ids = FieldIds(ids_of(plan.stored))  # the table's field ids, and the meta columns' reserved ones
    last_column = max([int((prev or {}).get("last-column-id", 0)), *ids_of(plan.schema).values()])
    schema = iceberg_schema(plan.schema, ids)
    mapping = name_mapping(plan.stored, ids)
    spec, partition = im.partition_spec(plan.schema, plan.partition_fields, ids)
    incremental = not plan.full
    assert plan.full or can_continue(state, location, version), "an incremental plan builds on a snapshot"
    parent = im.current_snapshot(prev) if prev else None
    snap = Snapshot(secrets.randbits(62) + 1, int((prev or {}).get("last-sequence-number", 0)) + 1, location,
                    [], [], version)
    try:
        buckets = int(props[im.BUCKETS]) if incremental else im.buckets_for(len(plan.files))
        previous = _read_list(storage, parent, location) if parent else []
        columns = iceberg_columns(plan.schema, ids)
        listed = manifests(storage, plan, snap, partition, spec, schema, buckets, previous, columns)
        row_ids = None
        if version >= 3:
            first = im.next_row_id(prev if prev and prev.get("format-version") == version else None)
            listed, added = avro.assign_row_ids(listed, first)
            row_ids = (first, added)
        list_path = f"{METADATA_DIR}/snap-{snap.id}-{uuid.uuid4().hex}.avro"
        header = avro.list_metadata(snap.id, parent["snapshot-id"] if parent else None, snap.sequence,
                                    version, row_ids[0] if row_ids else None)
        snap.write(storage, list_path, avro.encode(avro.manifest_list_schema(version), listed, header))
        if parent:
            snap.retired.append(parent["manifest-list"])
        entry = im.snapshot_entry(snap.id, parent["snapshot-id"] if parent else None, snap.sequence, plan,
                                  snap.uri(list_path), totals(listed), row_ids)
        new = PublishedSnapshot.of(plan, snap.id)
        keep = retained([*state.snapshots, new], retention)
        if snap.retired:
            snap.write(storage, f"{METADATA_DIR}/retired-{snap.id}.json", json.dumps(snap.retired).encode())
        metadata = im.table_metadata(
            prev, table_uuid=(prev or {}).get("table-uuid") or str(uuid.uuid4()), location=location,
            schema=schema, last_column=last_column, mapping=mapping, spec=spec, snapshot=entry,
            keep={s.id for s in keep},
            buckets=buckets, previous_file=snap.uri(metadata_path(state.version)) if prev else None,
            now_ms=now_ms(), properties={im.VIEW: plan.view}, version=version)
        storage.write_if_absent(metadata_path(state.version + 1), json.dumps(metadata).encode())
    except AlreadyExists:
        _discard(storage, snap.written)
        raise PublishConflict(f"another publish of {location} committed Iceberg metadata version "
                              f"{state.version + 1} first; publish again") from None
    except BaseException:
        _discard(storage, snap.written)
        raise
    storage.write(HINT, str(state.version + 1).encode())
    return new


def _read_list(storage: Storage, snapshot: Mapping[str, Any], location: str) -> list[dict[str, Any]]:
    return avro.decode(storage.read(relative(snapshot["manifest-list"], location)))


def _discard(storage: Storage, paths: Iterable[str]) -> None:
    for p in paths:
        try:
            storage.delete(p)
        except Exception:  # best effort: an unreferenced file is never read
            pass


def expire(storage: Storage, before: Sequence[PublishedSnapshot], keep: Sequence[PublishedSnapshot]) -> None:
    """Delete what snapshots no longer retained alone referenced: the files each expired snapshot's
    successor retired (and those of the oldest retained one, whose predecessors are all gone). The
    publisher calls it after the catalog shows the new snapshot (a catalog may still read the expired
    one until then); skipped by a kill, the next expiry deletes them (the retired lists stay until)."""
    kept = {s.id for s in keep}
    gone = [s.id for s in before if s.id not in kept]
    if not gone:
        return
    for sid in [*gone, keep[0].id]:
        listed = f"{METADATA_DIR}/retired-{sid}.json"
        try:
            paths = json.loads(storage.read(listed))
        except (FileNotFoundError, ValueError):
            continue
        location = storage.uri.rstrip("/")  # never a file elsewhere (a table copied from there)
        _discard(storage, [relative(p, location) for p in paths if p.startswith(location + "/")])
        storage.delete(listed)
