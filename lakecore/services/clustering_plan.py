"""What to cluster: the clustering strategy, plan and operations, and the choice of file groups. Pure.

Clustering rewrites the latest file slice of a file group (its base file, if any, and its logs) into
ONE new base file, optionally sorted by columns and cut into row groups whose min/max statistics let
readers skip them. With the bucket index a key's file group is fixed by hashing, so clustering never
merges or splits file groups: it makes each chosen group's slice one well-laid-out file.

A plan is stored as the body of `<P>.replacecommit.requested` (P: the clustering's requested time).
Executors read exactly the planned files; logs completing after P join the new slice (completion-time
slicing), as for compaction. Works for copy-on-write and merge-on-read tables alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa

from lakecore.config import TableConfig, did_you_mean
from lakecore.errors import CorruptMetadata, InvalidClusteringStrategy
from lakecore.layout import FileSlice, FileSystemView

StrategyKind = Literal["small_files", "all"]
KINDS: tuple[str, ...] = ("small_files", "all")


@dataclass(frozen=True)
class ClusteringStrategy:
    """Which file groups to rewrite, and how.

    small_files: groups whose latest slice has more than one file (base + logs, several logs) or a
    base smaller than `small_file_bytes` (a slice without a base counts as small); all: every group
    with data. `sort_columns`: sort each new base file by these table columns (stable; nulls last).
    `max_groups`: at most this many groups per clustering (most files, then smallest, first).
    `row_group_rows`: rows per Parquet row group of the new base files.
    """

    kind: StrategyKind = "small_files"
    sort_columns: tuple[str, ...] = ()
    small_file_bytes: int = 64 << 20
    max_groups: int | None = None
    row_group_rows: int = 128 << 10

    def __post_init__(self) -> None:
        cols = self.sort_columns
        object.__setattr__(self, "sort_columns", (cols,) if isinstance(cols, str) else tuple(cols))
        if self.kind not in KINDS:
            raise InvalidClusteringStrategy(f"unknown clustering strategy {self.kind!r}"
                                            f"{did_you_mean([str(self.kind)], KINDS)}; use one of "
                                            f"{', '.join(KINDS)}")
        for name, value, low in (("small_file_bytes", self.small_file_bytes, 0),
                                 ("row_group_rows", self.row_group_rows, 1),
                                 ("max_groups", 1 if self.max_groups is None else self.max_groups, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidClusteringStrategy(f"clustering {name} must be an integer >= {low}, got "
                                                f"{value!r}")
        if len(set(self.sort_columns)) != len(self.sort_columns):
            raise InvalidClusteringStrategy(f"sort columns {list(self.sort_columns)} repeat a column; "
                                            "name each column once")

    def check(self, config: TableConfig) -> None:
        """Raise InvalidClusteringStrategy unless every sort column is a sortable table column."""
        names = config.schema.names
        for c in self.sort_columns:
            if c not in names:
                raise InvalidClusteringStrategy(f"sort column {c!r} is not a column of table "
                                                f"{config.name!r}; use some of {', '.join(names)}")
            kind = config.schema.field(c).type
            if pa.types.is_nested(kind) or pa.types.is_dictionary(kind):
                raise InvalidClusteringStrategy(f"sort column {c!r} has type {kind}, which cannot be "
                                                "sorted; pick a column of a primitive type")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "sort_columns": list(self.sort_columns),
                "small_file_bytes": self.small_file_bytes, "max_groups": self.max_groups,
                "row_group_rows": self.row_group_rows}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ClusteringStrategy:
        return cls(_str(d, "kind"), tuple(_strs(d, "sort_columns")),  # type: ignore[arg-type]
                   _int(d, "small_file_bytes"),
                   None if d.get("max_groups") is None else _int(d, "max_groups"), _int(d, "row_group_rows"))


CLUSTER_SMALL_FILES = ClusteringStrategy()


@dataclass(frozen=True)
class ClusteringOperation:
    """One file group to rewrite: its latest slice's files, in merge order (base first, then logs in
    completion order), as names inside the partition directory."""

    partition: str
    file_id: str
    base_instant: str | None            # the replaced slice's base instant (None: a slice of logs only)
    base_file: str | None
    log_files: tuple[str, ...] = ()
    bytes: int = 0                      # size of the slice's files when planned

    def paths(self) -> list[str]:
        names = ([self.base_file] if self.base_file else []) + list(self.log_files)
        return [f"{self.partition}/{n}" if self.partition else n for n in names]

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "file_id": self.file_id, "base_instant": self.base_instant,
                "base_file": self.base_file, "log_files": list(self.log_files), "bytes": self.bytes}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ClusteringOperation:
        return cls(_str(d, "partition"), _str(d, "file_id"), _opt_str(d, "base_instant"),
                   _opt_str(d, "base_file"), tuple(_strs(d, "log_files")), _int(d, "bytes"))


@dataclass(frozen=True)
class ClusteringPlan:
    instant_time: str                               # P: the clustering's requested time ("" dry run)
    operations: tuple[ClusteringOperation, ...]     # sorted by (partition, file id)
    strategy: ClusteringStrategy = field(default_factory=ClusteringStrategy)

    @property
    def file_groups(self) -> frozenset[tuple[str, str]]:
        return frozenset((o.partition, o.file_id) for o in self.operations)

    def dumps(self) -> bytes:
        return json.dumps({"instant_time": self.instant_time, "strategy": self.strategy.to_json(),
                           "operations": [o.to_json() for o in self.operations]},
                          separators=(",", ":")).encode()

    @classmethod
    def loads(cls, data: bytes, *, source: str = "clustering plan") -> ClusteringPlan:
        try:
            obj = json.loads(data)
            if not isinstance(obj, dict) or not isinstance(obj.get("operations"), list):
                raise ValueError("not a plan object with a list of operations")
            strategy = obj.get("strategy")
            if not isinstance(strategy, dict):
                raise ValueError("strategy is not an object")
            plan = cls(_str(obj, "instant_time"), tuple(ClusteringOperation.from_json(o)
                                                        for o in obj["operations"]),
                       ClusteringStrategy.from_json(strategy))
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError,
                AttributeError, InvalidClusteringStrategy) as exc:
            raise CorruptMetadata(f"{source} is truncated or corrupted ({exc!r}); roll the clustering back "
                                  "(`weir table repair TABLE --run` quarantines the plan and does it; or "
                                  "rollback_clustering) and schedule a new one") from exc
        return plan


def _str(d: dict[str, Any], key: str) -> str:
    value = d[key]
    if not isinstance(value, str):
        raise ValueError(f"{key} must be a string, got {value!r}")
    return value


def _opt_str(d: dict[str, Any], key: str) -> str | None:
    return None if d.get(key) is None else _str(d, key)


def _strs(d: dict[str, Any], key: str) -> list[str]:
    value = d[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key} must be a list of strings, got {value!r}")
    return value


def _int(d: dict[str, Any], key: str) -> int:
    value = d[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    return value


def operation_of(fs: FileSlice) -> ClusteringOperation:
    return ClusteringOperation(fs.partition, fs.file_id, fs.base_instant,
                               fs.base.file_name if fs.base else None,
                               tuple(lf.stat.file_name for lf in fs.logs), sum(f.bytes for f in fs.files))


def is_small(fs: FileSlice, small_file_bytes: int) -> bool:
    return len(fs.files) > 1 or fs.base is None or fs.base.bytes < small_file_bytes


def plan_clustering(view: FileSystemView, config: TableConfig,
                    strategy: ClusteringStrategy = CLUSTER_SMALL_FILES) -> tuple[ClusteringOperation, ...]:
    """The operations `strategy` picks from the latest slices of `view`, in (partition, file id) order.
    Raises InvalidClusteringStrategy for sort columns the table does not have."""
    strategy.check(config)
    slices = [s for s in view.slices if s.files]
    if strategy.kind == "small_files":
        slices = [s for s in slices if is_small(s, strategy.small_file_bytes)]
    if strategy.max_groups is not None and len(slices) > strategy.max_groups:
        ranked = sorted(slices, key=lambda s: (-len(s.files), sum(f.bytes for f in s.files),
                                               s.partition, s.file_id))
        slices = sorted(ranked[:strategy.max_groups], key=lambda s: (s.partition, s.file_id))
    return tuple(operation_of(s) for s in slices)
