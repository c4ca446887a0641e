"""What to compact: the compaction plan value and the strategies that choose file slices. Pure.

A plan names, for each chosen file slice, its base file and exactly the log files to fold in; it is
stored as the body of `<P>.compaction.requested`, where P is the plan's instant time. Executors read
those files and nothing else, so logs completed after P are left for the next slice (completion-time
slicing puts them there). Only slices with at least one log file are ever planned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lakecore.config import TableConfig, did_you_mean
from lakecore.errors import CorruptMetadata, InvalidCompactionStrategy
from lakecore.layout import FileSlice, FileSystemView

StrategyKind = Literal["all", "log_count", "log_size", "bounded_io"]
KINDS: tuple[StrategyKind, ...] = get_args(StrategyKind)


@dataclass(frozen=True)
class CompactionStrategy:
    """Which slices to compact.

    all: every slice with logs; log_count: slices with >= `min_logs` log files; log_size: slices
    whose log bytes >= `min_log_bytes`; bounded_io: slices by log bytes, largest first, until the
    bytes read (base + logs) reach `io_budget_bytes` (the slice crossing the budget is included, so
    one slice larger than the budget still gets compacted).
    """

    kind: StrategyKind = "all"
    min_logs: int = 1
    min_log_bytes: int = 0
    io_budget_bytes: int = 512 << 20

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidCompactionStrategy(f"unknown compaction strategy {self.kind!r}"
                                            f"{did_you_mean([str(self.kind)], KINDS)}; use one of "
                                            f"{', '.join(KINDS)}")
        for name, value, low in (("min_logs", self.min_logs, 1), ("min_log_bytes", self.min_log_bytes, 0),
                                 ("io_budget_bytes", self.io_budget_bytes, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidCompactionStrategy(f"compaction {name} must be an integer >= {low}, got "
                                                f"{value!r}")


COMPACT_ALL = CompactionStrategy()


@dataclass(frozen=True)
class CompactionOperation:
    partition: str
    file_id: str
    base_file: str | None          # file name inside the partition, None for a base-less slice
    log_files: tuple[str, ...]     # in the slice's (completion) order, the order they merge in
    base_instant: str | None = None

    def paths(self) -> list[str]:
        names = ([self.base_file] if self.base_file else []) + list(self.log_files)
        return [f"{self.partition}/{n}" if self.partition else n for n in names]

    def to_json(self) -> dict[str, Any]:
        return {"partition": self.partition, "file_id": self.file_id, "base_file": self.base_file,
                "log_files": list(self.log_files), "base_instant": self.base_instant}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CompactionOperation:
        base = d.get("base_file")
        return cls(str(d["partition"]), str(d["file_id"]), None if base is None else str(base),
                   tuple(str(n) for n in d["log_files"]), d.get("base_instant"))


@dataclass(frozen=True)
class CompactionPlan:
    instant_time: str                          # P: the compaction's requested time
    operations: tuple[CompactionOperation, ...]
    strategy: str = "all"

    def dumps(self) -> bytes:
        return json.dumps({"instant_time": self.instant_time, "strategy": self.strategy,
                           "operations": [o.to_json() for o in self.operations]},
                          separators=(",", ":")).encode()

    @classmethod
    def loads(cls, data: bytes, *, source: str = "compaction plan") -> CompactionPlan:
        try:
            obj = json.loads(data)
            return cls(str(obj["instant_time"]),
                       tuple(CompactionOperation.from_json(o) for o in obj["operations"]),
                       str(obj.get("strategy", "all")))
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError,
                AttributeError) as exc:
            raise CorruptMetadata(f"{source} is truncated or corrupted ({exc!r}); roll the compaction back "
                                  "(`weir table repair TABLE --run` quarantines the plan and does it; or "
                                  "rollback_compaction) and schedule a new one") from exc


def operation_of(fs: FileSlice) -> CompactionOperation:
    return CompactionOperation(fs.partition, fs.file_id, fs.base.file_name if fs.base else None,
                               tuple(lf.stat.file_name for lf in fs.logs), fs.base_instant)


def _log_bytes(fs: FileSlice) -> int:
    return sum(lf.stat.bytes for lf in fs.logs)


def plan_compaction(view: FileSystemView, config: TableConfig,
                    strategy: CompactionStrategy = COMPACT_ALL) -> tuple[CompactionOperation, ...]:
    """The operations `strategy` picks from the latest slices of `view`, in (partition, file id) order."""
    del config  # every strategy so far decides from the slices alone; kept for config-driven ones
    slices = [s for s in view.slices if s.logs]
    if strategy.kind == "log_count":
        slices = [s for s in slices if len(s.logs) >= strategy.min_logs]
    elif strategy.kind == "log_size":
        slices = [s for s in slices if _log_bytes(s) >= strategy.min_log_bytes]
    elif strategy.kind == "bounded_io":
        chosen, spent = [], 0
        for s in sorted(slices, key=lambda s: (-_log_bytes(s), s.partition, s.file_id)):
            if spent >= strategy.io_budget_bytes:
                break
            chosen.append(s)
            spent += _log_bytes(s) + (s.base.bytes if s.base else 0)
        slices = sorted(chosen, key=lambda s: (s.partition, s.file_id))
    return tuple(operation_of(s) for s in slices)
