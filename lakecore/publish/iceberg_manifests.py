"""The manifests of one Iceberg publish: the entries of the plan's new files (data files, and the
position-delete files or, in v3, deletion vectors hiding their rows), the previous snapshot's manifests
carried over, rewritten or folded, and the manifest files written. `iceberg.commit` writes the manifest
list and the table metadata around it; which entries go where is decided by `iceberg_entries`.

Incremental (cost follows the instant, not the table): a file group that only gained log files keeps
its entries where they are (the rows its delete files hid stay hidden: a row that lost the merge keeps
losing), and the publish adds one manifest of the new data files and one of the new delete files (each
holding every row its data file hides now). Only the manifests listing a replaced or emptied group
(compaction, clustering, overwrite) are rewritten without it. After FOLD_AFTER such appended
manifests, a publish folds them back into their buckets (`iceberg_metadata.bucket_of`) and merges
each partition's delete files into one (`iceberg_deletes`), in the partition's bucket.

Format v3 allows at most one deletion vector per data file in a snapshot: every changed group's vectors
are dropped (the manifests holding them rewritten) and written anew, each holding every row its data
file hides now; a fold has nothing to merge.

Writes new files only (each recorded in `Snapshot.written`, for a cleanup on failure) and lists the
files the new snapshot stops referencing in `Snapshot.retired`; never deletes.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from lakecore.formats import map_files
from lakecore.publish import iceberg_avro as avro
from lakecore.publish import iceberg_deletes as deletes_
from lakecore.publish import iceberg_dvs as dvs
from lakecore.publish import iceberg_metadata as im
from lakecore.publish.bounds import IcebergColumn, iceberg_metrics
from lakecore.publish.iceberg_entries import (
    APPENDED,
    FOLD_AFTER,
    Entries,
    bucket,
    group_of,
    manifest_file,
    newest_deletes,
    partition_of,
    relative,
    without,
)
from lakecore.publish.plan import GroupKey, PlannedFile, PublishPlan
from lakecore.storage import Storage

METADATA_DIR = "metadata"
DELETES_DIR = f"{METADATA_DIR}/deletes"


@dataclass
class Snapshot:
    """What one publish writes, collected as it goes (for the retired list and a cleanup on failure)."""

    id: int
    sequence: int
    location: str
    written: list[str]
    retired: list[str]
    version: int = 2

    def uri(self, path: str) -> str:
        return f"{self.location}/{path}"

    def write(self, storage: Storage, path: str, data: bytes) -> None:
        self.written.append(path)
        storage.write(path, data)


def manifests(storage: Storage, plan: PublishPlan, snap: Snapshot, partition: Sequence[avro.PartitionField],
              spec: dict[str, Any], schema: dict[str, Any], buckets: int,
              previous: list[dict[str, Any]], columns: list[IcebergColumn]) -> list[dict[str, Any]]:
    """The manifest list's entries. Full: a manifest per bucket. Incremental: the previous manifests as
    they are, but those holding entries of rewritten groups (replaced or gone), which are written again
    without them (the rest carried as EXISTING); the new entries go to one appended manifest per content
    (data, deletes). Once FOLD_AFTER appended data manifests piled up, they are folded back into their
    buckets, keeping per data file only its newest delete file (each holds every row hidden then),
    and each partition's delete files are merged into one. Format v3: a changed group's deletion vectors
    are all dropped (its new ones replace them), and a fold merges nothing."""
    plan = _emptied_as_listed(storage, plan, snap, previous, buckets)
    new = _new_entries(storage, plan, snap, partition, buckets, columns)
    if plan.full:
        for m in previous:
            snap.retired.append(m["manifest_path"])
            if m["content"] == avro.POSITION_DELETES:  # its delete files are ours; data files are Weir's
                snap.retired.extend(e["data_file"]["file_path"] for e in _entries(storage, m, snap))
        return _written(storage, snap, new, partition, spec, schema)
    rewritten, dvs_ = plan.rewritten, snap.version >= 3
    drop = {avro.DATA: rewritten, avro.POSITION_DELETES: plan.replaced if dvs_ else rewritten}
    appended = [m for m in previous if bucket(m) < 0]
    fold = sum(m["content"] == avro.DATA for m in appended) >= FOLD_AFTER
    carried: Entries = {}
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
            b = im.bucket_of(*group_of(e["data_file"], snap.location), buckets) if fold else APPENDED
            touched.add((b, m["content"]))
            carried.setdefault((b, m["content"]), []).append(e)
    if fold and not dvs_:  # each partition's delete files are merged: its shared one (in its bucket) too
        touched |= {(im.bucket_of(partition_of(e["data_file"], snap.location), "", buckets), avro.DATA)
                    for (_, c), es in [*new.items(), *carried.items()] if c == avro.POSITION_DELETES
                    for e in es}
    if not dvs_:  # v2 rewrites a bucket's data and delete manifests together
        touched |= {(b, c) for b, _ in touched for c in (avro.DATA, avro.POSITION_DELETES)}
    for m in previous:
        b = bucket(m)
        if b < 0:
            continue
        if (b, m["content"]) not in touched:
            out.append(m)
            continue
        snap.retired.append(m["manifest_path"])
        carried.setdefault((b, m["content"]), []).extend(
            _without(_entries(storage, m, snap), drop[m["content"]], snap))
    for key, entries in carried.items():
        new.setdefault(key, []).extend({**e, "status": avro.EXISTING} for e in entries)
    if fold and not dvs_:
        new = {k: _newest_deletes(es, snap) if k[1] == avro.POSITION_DELETES else es for k, es in new.items()}
        listed = {snap.uri(f.path) for g in plan.groups for f in (*g.files, *g.emptied)}
        new = _merge_deletes(storage, snap, new, rewritten, listed, partition, buckets)
    return out + _written(storage, snap, new, partition, spec, schema)


def _entries(storage: Storage, m: Mapping[str, Any], snap: Snapshot) -> list[dict[str, Any]]:
    entries = avro.decode(storage.read(relative(m["manifest_path"], snap.location)))
    return avro.with_inherited_row_ids(m, entries)


def _without(entries: list[dict[str, Any]], groups: frozenset[GroupKey], snap: Snapshot
             ) -> list[dict[str, Any]]:
    kept, dropped = without(entries, groups, snap.location)
    snap.retired.extend(dropped)
    return kept


def _newest_deletes(entries: list[dict[str, Any]], snap: Snapshot) -> list[dict[str, Any]]:
    kept, older = newest_deletes(entries)
    snap.retired.extend(older)
    return kept


def _merge_deletes(storage: Storage, snap: Snapshot, entries: Entries, rewritten: frozenset[GroupKey],
                   listed: set[str], partition: Sequence[avro.PartitionField], buckets: int) -> Entries:
    """`entries` with the delete files of each partition merged into one (`iceberg_deletes`), in the
    partition's bucket, without the rows of the files rewritten groups no longer list (`listed`: the
    files the plan lists); a partition's lone shared file is kept as it is, the merged ones retired."""
    out = {k: es for k, es in entries.items() if k[1] != avro.POSITION_DELETES}
    by_partition: dict[str, list[dict[str, Any]]] = {}
    for (_, c), es in entries.items():
        if c == avro.POSITION_DELETES:
            for e in es:
                by_partition.setdefault(partition_of(e["data_file"], snap.location), []).append(e)

    def lone(es: list[dict[str, Any]]) -> bool:
        return len(es) == 1 and es[0]["data_file"]["referenced_data_file"] is None

    merging = sorted((p, es) for p, es in by_partition.items() if not lone(es))
    for p, es in by_partition.items():
        if lone(es):
            out.setdefault((im.bucket_of(p, "", buckets), avro.POSITION_DELETES), []).extend(es)
    paths = [relative(e["data_file"]["file_path"], snap.location) for _, es in merging for e in es]
    tables = iter(deletes_.read(storage, paths))

    def kept(path: str) -> bool:
        return path in listed or group_of({"content": avro.DATA, "file_path": path}, snap.location) \
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


def _emptied_as_listed(storage: Storage, plan: PublishPlan, snap: Snapshot, previous: list[dict[str, Any]],
                       buckets: int) -> PublishPlan:
    """`plan` with each group's emptied files (they show no row now) cut to those the previous snapshot
    lists: a file that never showed a row (a log of deletes only, rows that lost from the start) was never
    listed, and a delete file or deletion vector for it would name a data file no snapshot has. Reads
    the data manifests of those groups' buckets and the appended ones, only when a group has emptied
    files."""
    if plan.full or not any(g.emptied for g in plan.groups):
        return plan
    wanted = {im.bucket_of(g.partition, g.file_id, buckets) for g in plan.groups if g.emptied}
    listed: set[str] = set()
    for m in previous:
        if m["content"] == avro.DATA and (bucket(m) < 0 or bucket(m) in wanted):
            listed |= {e["data_file"]["file_path"] for e in _entries(storage, m, snap)
                       if e["status"] != avro.DELETED}
    return replace(plan, groups=tuple(
        replace(g, emptied=tuple(f for f in g.emptied if snap.uri(f.path) in listed)) if g.emptied else g
        for g in plan.groups))


def _written(storage: Storage, snap: Snapshot, entries: Entries, partition: Sequence[avro.PartitionField],
             spec: dict[str, Any], schema: dict[str, Any]) -> list[dict[str, Any]]:
    todo = [(b, c, es) for (b, c), es in sorted(entries.items()) if es]
    return map_files(lambda t: _write_manifest(storage, snap, *t, partition, spec, schema), todo)


def _new_entries(storage: Storage, plan: PublishPlan, snap: Snapshot,
                 partition: Sequence[avro.PartitionField], buckets: int, columns: list[IcebergColumn]
                 ) -> Entries:
    """ADDED entries of the plan's files (of an appended group: its new files) and of the
    position-delete files written for them (of an appended group: for each of its files hiding rows)."""
    out: Entries = {}
    hiding: list[PlannedFile] = []
    for g in plan.groups:
        b = im.bucket_of(g.partition, g.file_id, buckets)
        values = im.partition_record(g.partition, partition)
        for f in g.files:
            if g.before is None or f.path not in g.before:
                out.setdefault((b, avro.DATA), []).append(avro.entry(
                    avro.ADDED, snap.id, snap.sequence, avro.DATA, snap.uri(f.path), values, f.rows, f.bytes,
                    metrics=iceberg_metrics(f.stats, columns)))
        hiding.extend(f for f in (*g.files, *g.emptied) if len(f.hidden))
    if snap.version >= 3:
        return _dv_entries(storage, snap, hiding, partition, buckets, out)
    # a full rebuild: one delete file per partition (a reader reads a few files, not one per data file);
    # incremental: one per data file, so a later publish can tell whose it is
    batches = [[f for f in hiding if f.partition == p] for p in sorted({f.partition for f in hiding})] \
        if plan.full else [[f] for f in hiding]
    deletes = [(f"{DELETES_DIR}/{uuid.uuid4().hex}.parquet", batch) for batch in batches]
    snap.written.extend(p for p, _ in deletes)
    by_path = dict(deletes)
    sizes = map_files(lambda p: deletes_.write(storage, p, deletes_.rows_of(by_path[p], snap.uri)),
                      list(by_path))
    for (path, files), size in zip(deletes, sizes, strict=True):
        f = files[0]
        shared = plan.full
        b = im.bucket_of(f.partition, "" if shared else f.file_id, buckets)
        out.setdefault((b, avro.POSITION_DELETES), []).append(avro.entry(
            avro.ADDED, snap.id, snap.sequence, avro.POSITION_DELETES, snap.uri(path),
            im.partition_record(f.partition, partition), sum(len(f.hidden) for f in files), size,
            referenced=None if shared else snap.uri(f.path),
            path_bounds=(snap.uri(min(f.path for f in files)), snap.uri(max(f.path for f in files)))))
    return out


def _dv_entries(storage: Storage, snap: Snapshot, hiding: list[PlannedFile],
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


def _write_manifest(storage: Storage, snap: Snapshot, bucket_: int, content: int,
                    entries: list[dict[str, Any]], partition: Sequence[avro.PartitionField],
                    spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    kind = "data" if content == avro.DATA else "deletes"
    where = "a" if bucket_ == APPENDED else f"m{bucket_}"
    path = f"{METADATA_DIR}/{uuid.uuid4().hex}-{where}-{kind}.avro"
    data = avro.encode(avro.manifest_entry_schema(partition, snap.version), entries,
                       avro.manifest_metadata(schema, spec, content, snap.version))
    snap.write(storage, path, data)
    return manifest_file(snap.uri(path), len(data), spec["spec-id"], content, snap.id, snap.sequence, entries)
