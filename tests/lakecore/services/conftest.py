"""Helpers for the service tests: tables of each merge mode, a write held in flight, compaction,
clustering."""

from __future__ import annotations

import pyarrow as pa

from lakecore import ColumnGroup, Table
from lakecore.concurrency import begin_write, commit_write, view_of
from lakecore.config import FILE_NAME
from lakecore.services import (
    ClusteringStrategy,
    CompactionStrategy,
    run_clustering,
    run_compaction,
    schedule_clustering,
    schedule_compaction,
)
from lakecore.timeline import Instant
from lakecore.write import conform, route, write_file_group

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("name", pa.string()), ("value", pa.float64())])
WIDE = pa.schema([("id", pa.int64()), ("clicks", pa.int64()), ("click_ts", pa.int64()),
                  ("country", pa.string()), ("dim_ts", pa.int64())])
GROUPS = [ColumnGroup("clicks", ("clicks",), "click_ts"), ColumnGroup("dims", ("country",), "dim_ts")]


def rows(ids, ts, names=None):
    n = len(ids)
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "ts": pa.array(ts if isinstance(ts, list) else [ts] * n, pa.int64()),
                     "name": pa.array(names if names is not None else [f"n{i}@{ts}" for i in ids],
                                      pa.string()),
                     "value": pa.array([float(i) for i in ids], pa.float64())})


def keys(ids, ts=None):
    cols = {"id": pa.array(ids, pa.int64())}
    if ts is not None:
        cols["ts"] = pa.array(ts if isinstance(ts, list) else [ts] * len(ids), pa.int64())
    return pa.table(cols)


def create(uri: str, mode: str, **kw) -> Table:
    if mode == "partial_update":
        return Table.create(uri, schema=WIDE, record_key="id", column_groups=GROUPS, buckets=2, **kw)
    ordering = "ts" if mode == "event_time" else None
    return Table.create(uri, schema=SCHEMA, record_key="id", ordering_field=ordering,
                        merge_mode=mode, buckets=2, **kw)  # type: ignore[arg-type]


def snapshot(t: Table, **kw) -> list[dict]:
    out = t.read(**kw)
    return sorted(out.to_pylist(), key=lambda r: r["id"])


def changes(t: Table, start: str, end: str | None = None) -> list[tuple]:
    ch = t.read_changes(start, end).drop_columns([FILE_NAME])  # the file holding a row may change
    return sorted(tuple(sorted(r.items())) for r in ch.to_pylist())


def compact(t: Table, strategy: CompactionStrategy | None = None) -> Instant | None:
    plan = schedule_compaction(t.storage, t.config, t.lock, strategy or CompactionStrategy())
    return None if plan is None else run_compaction(t.storage, t.config, t.lock, plan)


def log_counts(t: Table) -> list[int]:
    return [len(s.logs) for s in view_of(t.storage, t.timeline()).slices]


class HeldWrite:
    """A merge-on-read write that has written its files but not committed (a writer in flight)."""

    def __init__(self, t: Table, data: pa.Table, operation: str = "upsert") -> None:
        self.table = t
        self.txn = begin_write(t.storage, t.config, t.lock, operation)  # type: ignore[arg-type]
        ctx = self.txn.context()
        groups = route(conform(data, t.config, operation).rows, t.config)  # type: ignore[arg-type]
        self.stats = [s for g in groups for s in write_file_group(ctx, g)]

    def commit(self) -> Instant:
        return commit_write(self.txn, self.stats, lock=self.table.lock)


def cluster(t: Table, strategy: ClusteringStrategy | None = None) -> Instant | None:
    plan = schedule_clustering(t.storage, t.config, t.lock, strategy or ClusteringStrategy())
    return None if plan is None else run_clustering(t.storage, t.config, t.lock, plan)


def file_counts(t: Table) -> list[int]:
    return [len(s.files) for s in view_of(t.storage, t.timeline()).slices]


class HeldBaseWrite(HeldWrite):
    """A write that has written its files but not committed, with the view a copy-on-write (or bulk
    insert) write needs to merge with the current base files."""

    def __init__(self, t: Table, data: pa.Table, operation: str = "upsert") -> None:
        self.table = t
        self.txn = begin_write(t.storage, t.config, t.lock, operation,  # type: ignore[arg-type]
                               need_view=True)
        ctx = self.txn.context()
        groups = route(conform(data, t.config, operation).rows, t.config)  # type: ignore[arg-type]
        self.stats = [s for g in groups for s in write_file_group(ctx, g)]
