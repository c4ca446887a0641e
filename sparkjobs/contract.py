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
