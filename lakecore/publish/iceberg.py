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

Incremental (cost follows the instant, not the table): a file group that only gained log files keeps
its entries where they are (the rows its delete files hid stay hidden: a row that lost the merge keeps
losing), and the publish adds one manifest of the new data files and one of the new delete files (each
holding every row its data file hides now). Only the manifests listing a replaced or emptied group
(compaction, clustering, overwrite) are rewritten without it. After FOLD_AFTER such appended
manifests, a publish folds them back into their buckets (`iceberg_metadata.bucket_of`) and merges
each partition's delete files into one (`iceberg_deletes`), in the partition's bucket.

Format v3 (`version=3`) hides rows with one deletion vector per data file instead, and allows at most
one per data file in a snapshot: every changed group's vectors are dropped (the manifests holding them
rewritten) and written anew, each holding every row its data file hides now; a fold has nothing to
merge. Row lineage: new data manifests get row ids from the table's `next-row-id`; a data file carried
into a rewritten manifest keeps the ones it inherited. A table published as v2 is upgraded by a full
rebuild (its v2 snapshots stay readable for time travel); v3 is never downgraded (`check_version`).
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
from lakecore.formats import map_files
from lakecore.layout import parse_data_file_name
from lakecore.publish import iceberg_avro as avro
from lakecore.publish import iceberg_deletes as deletes_
from lakecore.publish import iceberg_dvs as dvs
from lakecore.publish import iceberg_metadata as im
from lakecore.publish.bounds import IcebergColumn, iceberg_columns, iceberg_metrics
from lakecore.publish.plan import GroupKey, PlannedFile, PublishPlan
from lakecore.publish.snapshots import PublishedSnapshot, Retention, retained
from lakecore.publish.types import FieldIds, iceberg_schema, ids_of, name_mapping
from lakecore.storage import Storage
from lakecore.timeline import now_ms

METADATA_DIR = "metadata"
HINT = f"{METADATA_DIR}/version-hint.text"
DELETES_DIR = f"{METADATA_DIR}/deletes"
_VERSION = re.compile(r"^v(\d+)\.metadata\.json$")
_BUCKET = re.compile(r"-m(\d+)-(data|deletes)\.avro$")


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


@dataclass
class _Snapshot:
    """What one publish writes, collected as it goes (for the retired list and a cleanup on failure)."""

    id: int
    sequence: int
    location: str
    written: list[str]
    retired: list[str]
    version: int = 2

    def uri(self, path: str) -> str:
        return f"{self.location}/{path}"


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
    snap = _Snapshot(secrets.randbits(62) + 1, int((prev or {}).get("last-sequence-number", 0)) + 1, location,
                     [], [], version)
    try:
        buckets = int(props[im.BUCKETS]) if incremental else im.buckets_for(len(plan.files))
        previous = _read_list(storage, parent, location) if parent else []
        columns = iceberg_columns(plan.schema, ids)
        manifests = _manifests(storage, plan, snap, partition, spec, schema, buckets, previous, columns)
        row_ids = None
        if version >= 3:
            first = im.next_row_id(prev if prev and prev.get("format-version") == version else None)
            manifests, added = avro.assign_row_ids(manifests, first)
            row_ids = (first, added)
        list_path = f"{METADATA_DIR}/snap-{snap.id}-{uuid.uuid4().hex}.avro"
        header = avro.list_metadata(snap.id, parent["snapshot-id"] if parent else None, snap.sequence,
                                    version, row_ids[0] if row_ids else None)
        _write(storage, snap, list_path, avro.encode(avro.manifest_list_schema(version), manifests, header))
        if parent:
            snap.retired.append(parent["manifest-list"])
        entry = im.snapshot_entry(snap.id, parent["snapshot-id"] if parent else None, snap.sequence, plan,
                                  snap.uri(list_path), _totals(manifests), row_ids)
        new = PublishedSnapshot.of(plan, snap.id)
        keep = retained([*state.snapshots, new], retention)
        if snap.retired:
            _write(storage, snap, f"{METADATA_DIR}/retired-{snap.id}.json", json.dumps(snap.retired).encode())
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


def _manifests(storage: Storage, plan: PublishPlan, snap: _Snapshot, partition: Sequence[avro.PartitionField],
               spec: dict[str, Any], schema: dict[str, Any], buckets: int,
               previous: list[dict[str, Any]], columns: list[IcebergColumn]) -> list[dict[str, Any]]:
    """The manifest list's entries. Full: a manifest per bucket. Incremental: the previous manifests as
    they are, but those holding entries of rewritten groups (replaced or gone), which are written again
    without them (the rest carried as EXISTING); the new entries go to one appended manifest per content
    (data, deletes). Once FOLD_AFTER appended data manifests piled up, they are folded back into their
    buckets, keeping per data file only its newest delete file (each holds every row hidden then),
    and each partition's delete files are merged into one. Format v3: a changed group's deletion vectors
    are all dropped (its new ones replace them), and a fold merges nothing."""
    new = _new_entries(storage, plan, snap, partition, buckets, columns)
    if plan.full:
        for m in previous:
            snap.retired.append(m["manifest_path"])
            if m["content"] == avro.POSITION_DELETES:  # its delete files are ours; data files are Weir's
                snap.retired.extend(e["data_file"]["file_path"] for e in _entries(storage, m, snap))
        return _written(storage, snap, new, partition, spec, schema)
    rewritten, dvs_ = plan.rewritten, snap.version >= 3
    drop = {avro.DATA: rewritten, avro.POSITION_DELETES: plan.replaced if dvs_ else rewritten}
    appended = [m for m in previous if _bucket(m) < 0]
    fold = sum(m["content"] == avro.DATA for m in appended) >= FOLD_AFTER
    carried: dict[tuple[int, int], list[dict[str, Any]]] = {}
    out = []
    touched = {(im.bucket_of(p, f, buckets), c) for c, groups in drop.items() for p, f in groups}
    if fold:
        touched |= set(new)
    else:
        new = {(APPENDED, content): [e for (_, c), es in sorted(new.items()) if c == content for e in es]
               for content in (avro.DATA, avro.POSITION_DELETES)}
    for m in appended:
        if not fold and not drop[m["content"]]:
            out.append(m)
            continue
        entries = _entries(storage, m, snap)
        kept = _without(entries, drop[m["content"]], snap)
        if not fold and len(kept) == len(entries):
            out.append(m)
            continue
        snap.retired.append(m["manifest_path"])
        for e in kept:
            bucket = im.bucket_of(*_group_of(e["data_file"], snap.location), buckets) if fold else APPENDED
            touched.add((bucket, m["content"]))
            carried.setdefault((bucket, m["content"]), []).append(e)
    if fold and not dvs_:  # each partition's delete files are merged: its shared one (in its bucket) too
        touched |= {(im.bucket_of(_partition_of(e["data_file"], snap.location), "", buckets), avro.DATA)
                    for (_, c), es in [*new.items(), *carried.items()] if c == avro.POSITION_DELETES
                    for e in es}
    if not dvs_:  # v2 rewrites a bucket's data and delete manifests together
        touched |= {(b, c) for b, _ in touched for c in (avro.DATA, avro.POSITION_DELETES)}
    for m in previous:
        bucket = _bucket(m)
        if bucket < 0:
            continue
        if (bucket, m["content"]) not in touched:
            out.append(m)
            continue
        snap.retired.append(m["manifest_path"])
        carried.setdefault((bucket, m["content"]), []).extend(
            _without(_entries(storage, m, snap), drop[m["content"]], snap))
    for key, entries in carried.items():
        new.setdefault(key, []).extend({**e, "status": avro.EXISTING} for e in entries)
    if fold and not dvs_:
        new = {k: _newest_deletes(es, snap) if k[1] == avro.POSITION_DELETES else es for k, es in new.items()}
        listed = {snap.uri(f.path) for g in plan.groups for f in (*g.files, *g.emptied)}
        new = _merge_deletes(storage, snap, new, rewritten, listed, partition, buckets)
    return out + _written(storage, snap, new, partition, spec, schema)


FOLD_AFTER = 16
APPENDED = -1  # the "bucket" of an appended manifest


def _bucket(m: Mapping[str, Any]) -> int:
    found = _BUCKET.search(m["manifest_path"])
    return int(found.group(1)) if found else APPENDED


def _entries(storage: Storage, m: Mapping[str, Any], snap: _Snapshot) -> list[dict[str, Any]]:
    entries = avro.decode(storage.read(_relative(m["manifest_path"], snap.location)))
    return avro.with_inherited_row_ids(m, entries)


def _without(entries: list[dict[str, Any]], groups: frozenset[GroupKey], snap: _Snapshot
             ) -> list[dict[str, Any]]:
    """`entries` but those of `groups`; the delete files of the dropped ones are retired."""
    if not groups:
        return entries
    kept = []
    for e in entries:
        if _group_of(e["data_file"], snap.location) not in groups:
            kept.append(e)
        elif e["data_file"]["content"] == avro.POSITION_DELETES:
            snap.retired.append(e["data_file"]["file_path"])
    return kept


def _newest_deletes(entries: list[dict[str, Any]], snap: _Snapshot) -> list[dict[str, Any]]:
    """Per data file, its newest delete file only (each holds every row of it hidden at the time, and a
    row once hidden stays hidden in its slice); the older ones are retired."""
    newest: dict[str, dict[str, Any]] = {}
    for e in entries:
        ref = e["data_file"]["referenced_data_file"]
        if ref is None:
            continue  # a partition's delete file: kept (a newer one of a data file repeats its rows)
        if ref not in newest or e["sequence_number"] > newest[ref]["sequence_number"]:
            newest[ref] = e
    keep = {id(e) for e in newest.values()}
    drop = [e for e in entries if e["data_file"]["referenced_data_file"] is not None and id(e) not in keep]
    snap.retired.extend(e["data_file"]["file_path"] for e in drop)
    gone = {id(e) for e in drop}
    return [e for e in entries if id(e) not in gone]


def _merge_deletes(storage: Storage, snap: _Snapshot, entries: dict[tuple[int, int], list[dict[str, Any]]],
                   rewritten: frozenset[GroupKey], listed: set[str], partition: Sequence[avro.PartitionField],
                   buckets: int) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """`entries` with the delete files of each partition merged into one (`iceberg_deletes`), in the
    partition's bucket, without the rows of the files rewritten groups no longer list (`listed`: the
    files the plan lists); a partition's lone shared file is kept as it is, the merged ones retired."""
    out = {k: es for k, es in entries.items() if k[1] != avro.POSITION_DELETES}
    by_partition: dict[str, list[dict[str, Any]]] = {}
    for (_, c), es in entries.items():
        if c == avro.POSITION_DELETES:
            for e in es:
                by_partition.setdefault(_partition_of(e["data_file"], snap.location), []).append(e)

    def lone(es: list[dict[str, Any]]) -> bool:
        return len(es) == 1 and es[0]["data_file"]["referenced_data_file"] is None

    merging = sorted((p, es) for p, es in by_partition.items() if not lone(es))
    for p, es in by_partition.items():
        if lone(es):
            out.setdefault((im.bucket_of(p, "", buckets), avro.POSITION_DELETES), []).extend(es)
    paths = [_relative(e["data_file"]["file_path"], snap.location) for _, es in merging for e in es]
    tables = iter(deletes_.read(storage, paths))

    def kept(path: str) -> bool:
        return path in listed or _group_of({"content": avro.DATA, "file_path": path}, snap.location) \
            not in rewritten

    todo = []
    for p, es in merging:
        rows = deletes_.merged([next(tables) for _ in es], kept)
        snap.retired.extend(e["data_file"]["file_path"] for e in es)
        if rows.num_rows:
            todo.append((p, f"{DELETES_DIR}/{uuid.uuid4().hex}.parquet", rows))
    snap.written.extend(path for _, path, _ in todo)
    sizes = map_files(lambda t: deletes_.write(storage, t[1], t[2]), todo)
    for (p, path, rows), size in zip(todo, sizes, strict=True):
        names = rows.column("file_path")
        out.setdefault((im.bucket_of(p, "", buckets), avro.POSITION_DELETES), []).append(avro.entry(
            avro.ADDED, snap.id, snap.sequence, avro.POSITION_DELETES, snap.uri(path),
            im.partition_record(p, partition), rows.num_rows, size,
            path_bounds=(names[0].as_py(), names[-1].as_py())))
    return out


def _partition_of(data_file: Mapping[str, Any], location: str) -> str:
    """The partition path of a delete file's data files: its referenced one's, or its lowest one's."""
    path = data_file["referenced_data_file"]
    if path is None:
        low = [b["value"] for b in data_file["lower_bounds"] or () if b["key"] == avro.FILE_PATH_ID]
        path = low[0].decode() if low else data_file["file_path"]
    return _relative(path, location).rpartition("/")[0]


def _written(storage: Storage, snap: _Snapshot, entries: dict[tuple[int, int], list[dict[str, Any]]],
             partition: Sequence[avro.PartitionField], spec: dict[str, Any], schema: dict[str, Any]
             ) -> list[dict[str, Any]]:
    todo = [(b, c, es) for (b, c), es in sorted(entries.items()) if es]
    return map_files(lambda t: _write_manifest(storage, snap, *t, partition, spec, schema), todo)


def _new_entries(storage: Storage, plan: PublishPlan, snap: _Snapshot,
                 partition: Sequence[avro.PartitionField], buckets: int, columns: list[IcebergColumn]
                 ) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """ADDED entries of the plan's files (of an appended group: its new files) and of the
    position-delete files written for them (of an appended group: for each of its files hiding rows)."""
    out: dict[tuple[int, int], list[dict[str, Any]]] = {}
    hiding: list[PlannedFile] = []
    for g in plan.groups:
        bucket = im.bucket_of(g.partition, g.file_id, buckets)
        values = im.partition_record(g.partition, partition)
        for f in g.files:
            if g.before is None or f.path not in g.before:
                out.setdefault((bucket, avro.DATA), []).append(avro.entry(
                    avro.ADDED, snap.id, snap.sequence, avro.DATA, snap.uri(f.path), values, f.rows, f.bytes,
                    metrics=iceberg_metrics(f.stats, columns)))
        hiding.extend(f for f in (*g.files, *g.emptied) if len(f.hidden))
    if snap.version >= 3:
        return _dv_entries(storage, snap, hiding, partition, buckets, out)
    # a full rebuild: one delete file per partition (a reader reads a few files, not one per data file);
    # incremental: one per data file, so a later publish can tell whose it is
    batches = [[f for f in hiding if f.partition == p] for p in sorted({f.partition for f in hiding})] \
        if plan.full else [[f] for f in hiding]
    deletes = [(f"{DELETES_DIR}/{uuid.uuid4().hex}.parquet", b) for b in batches]
    snap.written.extend(p for p, _ in deletes)
    by_path = dict(deletes)
    sizes = map_files(lambda p: deletes_.write(storage, p, deletes_.rows_of(by_path[p], snap.uri)),
                      list(by_path))
    for (path, files), size in zip(deletes, sizes, strict=True):
        f = files[0]
        shared = plan.full
        bucket = im.bucket_of(f.partition, "" if shared else f.file_id, buckets)
        out.setdefault((bucket, avro.POSITION_DELETES), []).append(avro.entry(
            avro.ADDED, snap.id, snap.sequence, avro.POSITION_DELETES, snap.uri(path),
            im.partition_record(f.partition, partition), sum(len(f.hidden) for f in files), size,
            referenced=None if shared else snap.uri(f.path),
            path_bounds=(snap.uri(min(f.path for f in files)), snap.uri(max(f.path for f in files)))))
    return out


Entries = dict[tuple[int, int], list[dict[str, Any]]]  # manifest entries by (bucket, content)


def _dv_entries(storage: Storage, snap: _Snapshot, hiding: list[PlannedFile],
                partition: Sequence[avro.PartitionField], buckets: int, out: Entries) -> Entries:
    """`out` and the ADDED entries of a deletion vector (in a Puffin file of its own) per file of
    `hiding`, in its group's bucket."""
    todo = [(f"{DELETES_DIR}/{uuid.uuid4().hex}.puffin", f) for f in hiding]
    snap.written.extend(p for p, _ in todo)

    def write(item: tuple[str, PlannedFile]) -> dvs.DvPuffin:
        puffin = dvs.dv_puffin(snap.uri(item[1].path), item[1].hidden)
        storage.write(item[0], puffin.data)
        return puffin

    for (path, f), puffin in zip(todo, map_files(write, todo), strict=True):
        out.setdefault((im.bucket_of(f.partition, f.file_id, buckets), avro.POSITION_DELETES), []).append(
            avro.entry(avro.ADDED, snap.id, snap.sequence, avro.POSITION_DELETES, snap.uri(path),
                       im.partition_record(f.partition, partition), puffin.cardinality, len(puffin.data),
                       referenced=snap.uri(f.path), blob=(puffin.offset, puffin.length)))
    return out


def _write_manifest(storage: Storage, snap: _Snapshot, bucket: int, content: int,
                    entries: list[dict[str, Any]], partition: Sequence[avro.PartitionField],
                    spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    kind = "data" if content == avro.DATA else "deletes"
    where = "a" if bucket == APPENDED else f"m{bucket}"
    path = f"{METADATA_DIR}/{uuid.uuid4().hex}-{where}-{kind}.avro"
    data = avro.encode(avro.manifest_entry_schema(partition, snap.version), entries,
                       avro.manifest_metadata(schema, spec, content, snap.version))
    _write(storage, snap, path, data)
    added = [e for e in entries if e["status"] == avro.ADDED]
    existing = [e for e in entries if e["status"] == avro.EXISTING]
    return {"manifest_path": snap.uri(path), "manifest_length": len(data),
            "partition_spec_id": spec["spec-id"], "content": content, "sequence_number": snap.sequence,
            "min_sequence_number": min(e["sequence_number"] for e in entries),
            "added_snapshot_id": snap.id, "added_files_count": len(added),
            "existing_files_count": len(existing), "deleted_files_count": 0,
            "added_rows_count": sum(e["data_file"]["record_count"] for e in added),
            "existing_rows_count": sum(e["data_file"]["record_count"] for e in existing),
            "deleted_rows_count": 0, "partitions": None, "key_metadata": None}


def _totals(manifests: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    data = [m for m in manifests if m["content"] == avro.DATA]
    deletes = [m for m in manifests if m["content"] == avro.POSITION_DELETES]

    def files(ms: list[Mapping[str, Any]]) -> int:
        return sum(m["added_files_count"] + m["existing_files_count"] for m in ms)

    def rows(ms: list[Mapping[str, Any]]) -> int:
        return sum(m["added_rows_count"] + m["existing_rows_count"] for m in ms)

    return {"total-data-files": files(data), "total-delete-files": files(deletes),
            "total-records": rows(data), "total-position-deletes": rows(deletes)}


def _read_list(storage: Storage, snapshot: Mapping[str, Any], location: str) -> list[dict[str, Any]]:
    return avro.decode(storage.read(_relative(snapshot["manifest-list"], location)))


def _group_of(data_file: Mapping[str, Any], location: str) -> GroupKey:
    """The file group an entry belongs to; a full rebuild's delete file of a partition belongs to none
    (a key of its own: never dropped with a group, as its rows of files that left the view hide nothing)."""
    if data_file["content"] and data_file["referenced_data_file"] is None:
        return "", data_file["file_path"]
    path = data_file["referenced_data_file"] if data_file["content"] else data_file["file_path"]
    partition, _, name = _relative(path, location).rpartition("/")
    parsed = parse_data_file_name(name)
    return partition, parsed.file_id if parsed else name


def _relative(uri: str, location: str) -> str:
    return uri[len(location) + 1:] if uri.startswith(location + "/") else uri


def _write(storage: Storage, snap: _Snapshot, path: str, data: bytes) -> None:
    snap.written.append(path)
    storage.write(path, data)


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
        _discard(storage, [_relative(p, location) for p in paths if p.startswith(location + "/")])
        storage.delete(listed)
