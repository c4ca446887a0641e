"""Names of data files, file groups and partition paths. Pure.

Base file: `<fileId>_<writeToken>_<T>.parquet`; log file: `.<fileId>_<T>.log.<version>_<writeToken>`,
where T is the writing instant's own requested time (so concurrent writers never collide and a log
file's slice is decided by its instant's completion time, not by its name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote, unquote

# Top-level directories of other formats' metadata written beside a table (lakecore.publish): Iceberg's
# `metadata/`, Delta's `_delta_log/` and its deletion vectors. A partition directory is always
# `field=value`, and an unpartitioned table keeps its data files at the root, so none of these can be
# Weir's; a listing of the table skips them (`is_table_path`).
FOREIGN_DIRS = frozenset({"metadata", "_delta_log", "_delta_dv"})

_BASE = re.compile(r"^([A-Za-z0-9-]+)_([A-Za-z0-9-]+)_(\d{17})\.parquet$")
_LOG = re.compile(r"^\.([A-Za-z0-9-]+)_(\d{17})\.log\.(\d+)_([A-Za-z0-9-]+)$")


@dataclass(frozen=True)
class DataFileName:
    file_id: str
    instant_time: str
    write_token: str
    kind: Literal["base", "log"]
    version: int = 0

    def __str__(self) -> str:
        if self.kind == "base":
            return f"{self.file_id}_{self.write_token}_{self.instant_time}.parquet"
        return f".{self.file_id}_{self.instant_time}.log.{self.version}_{self.write_token}"


def base_file_name(file_id: str, write_token: str, instant_time: str) -> str:
    return str(DataFileName(file_id, instant_time, write_token, "base"))


def log_file_name(file_id: str, instant_time: str, write_token: str, version: int = 1) -> str:
    return str(DataFileName(file_id, instant_time, write_token, "log", version))


def parse_data_file_name(name: str) -> DataFileName | None:
    if m := _BASE.match(name):
        return DataFileName(m.group(1), m.group(3), m.group(2), "base")
    if m := _LOG.match(name):
        return DataFileName(m.group(1), m.group(2), m.group(4), "log", int(m.group(3)))
    return None


def is_table_path(path: str) -> bool:
    """Whether a path found by listing the table's base may be one of its data files: not under `.weir/`
    nor under a directory of published metadata (FOREIGN_DIRS)."""
    top = path.split("/", 1)[0]
    return "/" not in path or (top != ".weir" and top not in FOREIGN_DIRS)


def bucket_file_id(bucket: int) -> str:
    """Deterministic file group id of a bucket: every writer of bucket b targets the same group."""
    return f"{bucket:08d}"


def write_token(task: int = 0, stage: int = 0, attempt: int = 0) -> str:
    return f"{task}-{stage}-{attempt}"


def partition_path(fields: tuple[str, ...], values: tuple[object, ...]) -> str:
    """Hive-style `f1=v1/f2=v2`; values percent-encoded so any string is a safe directory name."""
    return "/".join(f"{f}={quote(_fmt(v), safe='')}" for f, v in zip(fields, values, strict=True))


def parse_partition_path(path: str) -> dict[str, str]:
    if not path:
        return {}
    out = {}
    for part in path.split("/"):
        name, _, value = part.partition("=")
        out[name] = unquote(value)
    return out


def _fmt(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
