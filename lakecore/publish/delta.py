"""Delta metadata beside a Weir table: a `_delta_log` at the table root over Weir's Parquet files as
they are, rows hidden by deletion vectors.

    <base>/_delta_log/<v:020>.json                 one per publish, created only if absent: the commit
    <base>/_delta_log/<v:020>.checkpoint.parquet   every CHECKPOINT_EVERY versions, after the commit
    <base>/_delta_log/_last_checkpoint             its hint (replaced)
    <base>/_delta_dv/deletion_vector_<uuid>.bin    the deletion vectors one publish wrote

Protocol: reader 3 / writer 7 with the `deletionVectors` feature (and `timestampNtz` when a column
needs it). Each commit's `commitInfo.weir` names the Weir instant the version shows. A version adds
the data files of the file groups that changed (each with its deletion vector and `numRecords`) and
removes what the previous version listed for them, logical file by logical file (path and DV); a
full rebuild removes every file the log lists. A kill before the log entry leaves the previous
version current (the new DV file is never read); after it, the next publish writes the checkpoint
the dead one owed. Versions older than the newest checkpoint at or below the oldest retained one are
deleted, with the DV files no remaining version names.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pyarrow as pa

from lakecore.config import case_twins
from lakecore.errors import AlreadyExists, NotPublishable, PublishConflict
from lakecore.layout import parse_data_file_name, parse_partition_path
from lakecore.publish import delta_checkpoint as ckpt
from lakecore.publish.bounds import delta_stats
from lakecore.publish.deletion_vectors import DV_DIR, dv_file, dv_path, unique_id
from lakecore.publish.iceberg_metadata import partitioned
from lakecore.publish.plan import GroupKey, PublishPlan
from lakecore.publish.snapshots import PublishedSnapshot, Retention, retained
from lakecore.publish.types import delta_struct, needs_timestamp_ntz
from lakecore.storage import Storage
from lakecore.timeline import now_ms, to_epoch_ms

LOG_DIR = "_delta_log"
CHECKPOINT_EVERY = 10
_JSON = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_ORPHAN_AGE_S = 3600  # a DV file younger than this may belong to a publish still running


def log_path(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.json"


@dataclass(frozen=True)
class DeltaState:
    version: int                       # newest committed version (-1: no log)
    start: int                         # oldest version still reconstructible
    checkpoints: tuple[int, ...]
    snapshots: list[PublishedSnapshot] = field(default_factory=list)


def location(storage: Storage) -> str:
    """What Delta readers open: the table root (they find `_delta_log/` there)."""
    return storage.uri


def check_schema(schema: pa.Schema) -> None:
    """Raise NotPublishable for a column type Delta cannot hold, or names that differ only by case (Delta
    resolves columns ignoring case: delta-rs refuses the table, DuckDB's delta_scan too)."""
    delta_struct(schema)
    if (why := case_twins([], schema.names)) is not None:
        raise NotPublishable(f"Delta cannot hold this table: {why} (a table made before weir refused such "
                             "names); publish --format iceberg, which tells them apart")


def load(storage: Storage) -> DeltaState:
    names = storage.list_names(LOG_DIR)
    versions = sorted(int(m.group(1)) for n in names if (m := _JSON.match(n)))
    checkpoints = tuple(sorted(int(m.group(1)) for n in names if (m := _CHECKPOINT.match(n))))
    if not versions:
        return DeltaState(-1, 0, checkpoints)
    start = 0 if versions[0] == 0 else min((c for c in checkpoints if c <= versions[-1]), default=versions[0])
    snapshots = []
    for v in (v for v in versions if v >= start):
        weir = _commit_info(storage, v).get("weir")
        if isinstance(weir, dict) and "instant" in weir:
            snapshots.append(PublishedSnapshot(weir["instant"], weir["completion"],
                                               weir.get("view", "snapshot"), v, weir.get("schema", "")))
    return DeltaState(versions[-1], start, checkpoints, snapshots)


def can_continue(state: DeltaState, location: str) -> bool:
    return state.version >= 0 and bool(state.snapshots) and state.snapshots[-1].id == state.version


def _commit_info(storage: Storage, version: int) -> dict[str, Any]:
    for line in storage.read(log_path(version)).splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            return dict(action["commitInfo"])
    return {}


def replay(storage: Storage, state: DeltaState) -> ckpt.LogState:
    """The table state at the newest version: its newest checkpoint, then the log entries after it."""
    base = max((c for c in state.checkpoints if c <= state.version), default=None)
    log = ckpt.read_checkpoint(storage, f"{LOG_DIR}/{base:020d}.checkpoint.parquet") if base is not None \
        else ckpt.LogState()
    for v in range((base + 1) if base is not None else 0, state.version + 1):
        log.apply(json.loads(line) for line in storage.read(log_path(v)).splitlines() if line.strip())
    return log


def commit(storage: Storage, plan: PublishPlan, state: DeltaState, retention: Retention) -> PublishedSnapshot:
    version = state.version + 1
    log = replay(storage, state) if state.version >= 0 else ckpt.LogState()
    stamp = now_ms()
    actions: list[dict[str, Any]] = [{"commitInfo": {
        "timestamp": stamp, "operation": "WRITE", "operationParameters": {"mode": "Overwrite"},
        "engineInfo": "weir", "isBlindAppend": False,
        "weir": {"instant": plan.instant.requested_time, "completion": plan.instant.completion_time,
                 "view": plan.view, "action": plan.instant.action, "schema": plan.fingerprint}}}]
    protocol, metadata = _protocol(plan), _metadata(plan, log.metadata)
    if log.protocol != protocol:
        actions.append({"protocol": protocol})
    if log.metadata != metadata:
        actions.append({"metaData": metadata})
    dvs = dv_file([f.hidden for f in plan.files if len(f.hidden)])
    descriptors = iter(dvs.descriptors)
    columns = list(metadata["partitionColumns"])
    modified = to_epoch_ms(plan.instant.completion_time or plan.instant.requested_time)
    adds: dict[str, dict[str, Any]] = {}
    for f in plan.files:
        values = parse_partition_path(f.partition)
        adds[f.path] = {"path": quote(f.path, safe="/="), "partitionValues": {c: values[c] for c in columns},
                        "size": f.bytes, "modificationTime": modified, "dataChange": True,
                        "stats": json.dumps(delta_stats(f.stats, plan.schema, f.rows,
                                                        hides_rows=bool(len(f.hidden)))),
                        "deletionVector": next(descriptors) if len(f.hidden) else None}
    for path, old in sorted(log.files.items()):
        if plan.full or _group(path) in plan.replaced:
            again = adds.get(path)
            if again is not None and _dv_id(again) == _dv_id(old):
                del adds[path]  # the same logical file: neither removed nor added
                continue
            actions.append({"remove": {
                "path": old["path"], "deletionTimestamp": stamp, "dataChange": True,
                "extendedFileMetadata": True, "partitionValues": old["partitionValues"], "size": old["size"],
                "deletionVector": old.get("deletionVector")}})
    actions += [{"add": a} for _, a in sorted(adds.items())]
    if dvs.descriptors:
        storage.write(dvs.path, dvs.data)
    body = "\n".join(json.dumps(a, separators=(",", ":")) for a in actions).encode() + b"\n"
    try:
        storage.write_if_absent(log_path(version), body)
    except AlreadyExists:
        storage.delete(dvs.path)
        raise PublishConflict(f"another publish of {storage.uri} committed Delta version {version} first; "
                              "publish again") from None
    except BaseException:
        storage.delete(dvs.path)
        raise
    new = PublishedSnapshot.of(plan, version)
    log.apply(actions)
    after = DeltaState(version, state.start, state.checkpoints, [*state.snapshots, new])
    newest = max(state.checkpoints, default=-1)
    if version % CHECKPOINT_EVERY == 0 or version - newest > CHECKPOINT_EVERY:  # or one a killed publish owed
        _checkpoint(storage, after, log, retained(after.snapshots, retention)[0].id)
    return new


def expire(storage: Storage, before: Sequence[PublishedSnapshot], keep: Sequence[PublishedSnapshot]) -> None:
    """Nothing: a Delta log drops the versions retention no longer keeps at its checkpoint (`commit`),
    and no catalog of Weir's points at a version."""


def _protocol(plan: PublishPlan) -> dict[str, Any]:
    features = ["deletionVectors", *(["timestampNtz"] if needs_timestamp_ntz(plan.schema) else [])]
    return {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features,
            "writerFeatures": features}


def _metadata(plan: PublishPlan, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    columns = list(plan.partition_fields) if partitioned(plan.schema, plan.partition_fields) else []
    prev = dict(previous or {})
    return {"id": prev.get("id") or str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(delta_struct(plan.schema)), "partitionColumns": columns,
            "configuration": {"delta.enableDeletionVectors": "true",
                              "delta.checkpointInterval": str(CHECKPOINT_EVERY), "weir.view": plan.view},
            "createdTime": prev.get("createdTime") or now_ms()}


def _dv_id(add: Mapping[str, Any]) -> str | None:
    return unique_id(add.get("deletionVector"))


def _group(path: str) -> GroupKey:
    partition, _, name = path.rpartition("/")
    parsed = parse_data_file_name(name)
    return partition, parsed.file_id if parsed else name


def _checkpoint(storage: Storage, state: DeltaState, log: ckpt.LogState, oldest_kept: int) -> None:
    """Checkpoint the newest version, then drop the log entries no retained version needs and the DV
    files no remaining version names."""
    path = f"{LOG_DIR}/{state.version:020d}.checkpoint.parquet"
    size = ckpt.write_checkpoint(storage, path, log)
    storage.write(f"{LOG_DIR}/_last_checkpoint", json.dumps(
        {"version": state.version, "size": size, "numOfAddFiles": len(log.files)}).encode())
    checkpoints = sorted({*state.checkpoints, state.version})
    start = max((c for c in checkpoints if c <= oldest_kept), default=state.start)
    if start <= state.start:
        return
    live = _dv_files(log.files.values())  # named now, at `start` (its checkpoint) or by versions between
    at_start = ckpt.read_checkpoint(storage, f"{LOG_DIR}/{start:020d}.checkpoint.parquet")
    live |= _dv_files(at_start.files.values())
    for v in range(start + 1, state.version):
        live |= _dv_files(a["add"] for a in _actions(storage, v) if "add" in a)
    for v in range(state.start, start):
        storage.delete(log_path(v))
    for c in (c for c in checkpoints if c < start):
        storage.delete(f"{LOG_DIR}/{c:020d}.checkpoint.parquet")
    cutoff = now_ms() / 1000 - _ORPHAN_AGE_S
    for info in storage.list_dir(DV_DIR):
        if info.path not in live and info.mtime < cutoff:
            storage.delete(info.path)


def _actions(storage: Storage, version: int) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in storage.read(log_path(version)).splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def _dv_files(adds: Iterable[Mapping[str, Any]]) -> set[str]:
    return {p for a in adds if a.get("deletionVector") and (p := dv_path(a["deletionVector"]))}
