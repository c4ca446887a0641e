"""Argument dataclasses of every Spark job, with to/from argv.

Standard library only: the operator imports this module to build job commands and must not pull in pyspark
or the rest of sparkjobs (an import-linter contract enforces it).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field, fields

OPERATIONS = ("upsert", "insert", "bulk_insert", "delete")
EARLY_DETECTION = ("direct", "direct_zk", "marker_service")

# Exit codes of every job, for the operator's restart policy.
EXIT_OK = 0
EXIT_FAILED = 1          # anything else: retry with backoff
EXIT_BAD_INPUT = 2       # the input or the table's configuration is wrong: retrying does not help
EXIT_CONFLICT = 3        # lost a write conflict (early or at commit): restart after the winner commits


@dataclass(frozen=True)
class BatchWriteArgs:
    """`sparkjobs.batch_write`: write one input (any Spark source) into a table as one instant."""

    table: str                                   # table URI (local path, file://, s3://, memory://)
    source: str                                  # input path or URI, read with `source_format`
    source_format: str = "parquet"               # parquet | json | csv | orc | any Spark source
    operation: str = "upsert"
    source_options: dict[str, str] = field(default_factory=dict)
    zookeeper: str | None = None                 # table lock in ZooKeeper; default: lock file on storage
    early_detection: str | None = None           # direct | direct_zk | marker_service (OCC tables)
    max_rows_per_file: int | None = None         # roll files over (bounds an early abort's waste)
    extra: dict[str, str] = field(default_factory=dict)  # kept in the commit metadata
    app_name: str = "weir-batch-write"

    def __post_init__(self) -> None:
        if self.operation not in OPERATIONS:
            raise ValueError(f"operation {self.operation!r} is not one of {', '.join(OPERATIONS)}")
        if self.early_detection is not None and self.early_detection not in EARLY_DETECTION:
            raise ValueError(f"early detection {self.early_detection!r} is not one of "
                             f"{', '.join(EARLY_DETECTION)}")
        if self.early_detection == "direct_zk" and not self.zookeeper:
            raise ValueError("early detection direct_zk needs --zookeeper (a connect string)")
        if self.max_rows_per_file is not None and self.max_rows_per_file < 1:
            raise ValueError("max_rows_per_file must be at least 1")

    def to_argv(self) -> list[str]:
        """The job's command-line arguments (what the operator puts after the entry point)."""
        argv: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == {} or (value == f.default and f.name not in ("table", "source")):
                continue
            argv += [f"--{f.name.replace('_', '-')}",
                     json.dumps(value, sort_keys=True) if isinstance(value, dict) else str(value)]
        return argv

    @classmethod
    def from_argv(cls, argv: list[str]) -> BatchWriteArgs:
        p = argparse.ArgumentParser(prog="sparkjobs.batch_write", description=cls.__doc__)
        p.add_argument("--table", required=True)
        p.add_argument("--source", required=True)
        p.add_argument("--source-format", default="parquet")
        p.add_argument("--operation", default="upsert", choices=OPERATIONS)
        p.add_argument("--source-options", type=_json_object, default={})
        p.add_argument("--zookeeper")
        p.add_argument("--early-detection", choices=EARLY_DETECTION)
        p.add_argument("--max-rows-per-file", type=int)
        p.add_argument("--extra", type=_json_object, default={})
        p.add_argument("--app-name", default="weir-batch-write")
        return cls(**vars(p.parse_args(argv)))


def _json_object(text: str) -> dict[str, str]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {text!r}")
    return {str(k): str(v) for k, v in value.items()}


SERVICES = ("compaction", "clustering", "clean", "archival")


@dataclass(frozen=True)
class TableServiceArgs:
    """`sparkjobs.table_service`: run one table service (pending work first, then what is due)."""

    table: str
    service: str                                 # compaction | clustering | clean | archival
    zookeeper: str | None = None                 # table lock in ZooKeeper; default: lock file on storage
    compaction_strategy: str = "all"             # all | log_count | log_size | bounded_io
    clustering_strategy: str = "small_files"     # small_files | all
    sort_columns: tuple[str, ...] = ()           # clustering: sort each new base file by these
    clean_policy: str = "keep_latest_commits"    # keep_latest_commits | keep_latest_file_versions | ...
    clean_retained: int | None = None            # commits, versions or hours (per policy); None: default
    archive_min_instants: int = 20
    archive_max_instants: int = 30
    app_name: str = "weir-table-service"

    def __post_init__(self) -> None:
        if self.service not in SERVICES:
            raise ValueError(f"service {self.service!r} is not one of {', '.join(SERVICES)}")
        if not 0 < self.archive_min_instants < self.archive_max_instants:
            raise ValueError("archival needs 0 < archive_min_instants < archive_max_instants")

    def to_argv(self) -> list[str]:
        argv: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or (value == f.default and f.name not in ("table", "service")):
                continue
            flag = f"--{f.name.replace('_', '-')}"
            argv += [flag, ",".join(value)] if isinstance(value, tuple) else [flag, str(value)]
        return argv

    @classmethod
    def from_argv(cls, argv: list[str]) -> TableServiceArgs:
        p = argparse.ArgumentParser(prog="sparkjobs.table_service", description=cls.__doc__)
        p.add_argument("--table", required=True)
        p.add_argument("--service", required=True, choices=SERVICES)
        p.add_argument("--zookeeper")
        p.add_argument("--compaction-strategy", default="all")
        p.add_argument("--clustering-strategy", default="small_files")
        p.add_argument("--sort-columns", type=lambda s: tuple(c for c in s.split(",") if c), default=())
        p.add_argument("--clean-policy", default="keep_latest_commits")
        p.add_argument("--clean-retained", type=int)
        p.add_argument("--archive-min-instants", type=int, default=20)
        p.add_argument("--archive-max-instants", type=int, default=30)
        p.add_argument("--app-name", default="weir-table-service")
        return cls(**vars(p.parse_args(argv)))
