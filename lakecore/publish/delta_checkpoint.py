"""The state a Delta log describes (its files, metadata and protocol) and Delta's Parquet checkpoints
of it: replaying actions, reading a checkpoint, writing one.

A checkpoint holds one row per action (`add`, `metaData`, `protocol`; no `remove` tombstones: Weir
never vacuums through Delta, and readers do not need them), in the checkpoint schema of the Delta
protocol. Written whole to a temporary name and renamed (Storage.write), so a reader sees all of it
or none; `_last_checkpoint` is replaced after it.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from lakecore.storage import Storage

_STRINGS = pa.map_(pa.string(), pa.string())
_DV = pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string()), ("offset", pa.int32()),
                 ("sizeInBytes", pa.int32()), ("cardinality", pa.int64())])
_ADD = pa.struct([("path", pa.string()), ("partitionValues", _STRINGS), ("size", pa.int64()),
                  ("modificationTime", pa.int64()), ("dataChange", pa.bool_()), ("stats", pa.string()),
                  ("tags", _STRINGS), ("deletionVector", _DV)])
_REMOVE = pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_()),
                     ("extendedFileMetadata", pa.bool_()), ("partitionValues", _STRINGS),
                     ("size", pa.int64()), ("deletionVector", _DV)])
_METADATA = pa.struct([("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
                       ("format", pa.struct([("provider", pa.string()), ("options", _STRINGS)])),
                       ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
                       ("configuration", _STRINGS), ("createdTime", pa.int64())])
_PROTOCOL = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
                       ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string()))])
_TXN = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
SCHEMA = pa.schema([("txn", _TXN), ("add", _ADD), ("remove", _REMOVE), ("metaData", _METADATA),
                    ("protocol", _PROTOCOL)])


@dataclass
class LogState:
    """Files (by decoded path) with their `add` actions, the metadata and the protocol."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None
    protocol: dict[str, Any] | None = None

    def apply(self, actions: Iterable[Mapping[str, Any]]) -> None:
        for a in actions:
            if "add" in a:
                self.files[unquote(a["add"]["path"])] = dict(a["add"])
            elif "remove" in a:
                path = unquote(a["remove"]["path"])
                if path in self.files and _same_dv(self.files[path], a["remove"]):
                    del self.files[path]
            elif "metaData" in a:
                self.metadata = dict(a["metaData"])
            elif "protocol" in a:
                self.protocol = dict(a["protocol"])


def _same_dv(add: Mapping[str, Any], remove: Mapping[str, Any]) -> bool:
    def key(d: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
        return None if not d else (d["storageType"], d["pathOrInlineDv"], d.get("offset"))

    return key(add.get("deletionVector")) == key(remove.get("deletionVector"))


def _pairs(m: Mapping[str, Any] | None) -> list[tuple[str, str]] | None:
    return None if m is None else list(m.items())


def _dict(pairs: Any) -> dict[str, str]:
    return dict(pairs or ())


def write_checkpoint(storage: Storage, path: str, state: LogState) -> int:
    """Write the checkpoint of `state`; returns its number of actions."""
    rows: list[dict[str, Any]] = []
    if state.protocol is not None:
        rows.append({"protocol": state.protocol})
    if state.metadata is not None:
        md = dict(state.metadata)
        md["format"] = {**md["format"], "options": _pairs(md["format"].get("options") or {})}
        md["configuration"] = _pairs(md.get("configuration") or {})
        rows.append({"metaData": md})
    for add in state.files.values():
        rows.append({"add": {**add, "partitionValues": _pairs(add.get("partitionValues") or {}),
                             "tags": _pairs(add.get("tags"))}})
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")
    storage.write(path, out.getvalue())
    return table.num_rows


def read_checkpoint(storage: Storage, path: str) -> LogState:
    table = pq.read_table(io.BytesIO(storage.read(path)), columns=["add", "metaData", "protocol"])
    state = LogState()
    for row in table.to_pylist():
        if row["add"] is not None:
            add = {k: v for k, v in row["add"].items() if v is not None}
            add["partitionValues"] = _dict(add.get("partitionValues"))
            if "tags" in add:
                add["tags"] = _dict(add["tags"])
            add.setdefault("deletionVector", None)
            if add["deletionVector"] is not None:
                add["deletionVector"] = {k: v for k, v in add["deletionVector"].items() if v is not None}
            state.files[unquote(add["path"])] = add
        elif row["metaData"] is not None:
            md = {k: v for k, v in row["metaData"].items() if v is not None}
            md["format"] = {**md["format"], "options": _dict(md["format"].get("options"))}
            md["configuration"] = _dict(md.get("configuration"))
            state.metadata = md
        elif row["protocol"] is not None:
            state.protocol = {k: v for k, v in row["protocol"].items() if v is not None}
    return state
