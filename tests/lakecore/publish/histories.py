"""Random write histories for the publishing tests: writes of every kind (upserts, inserts, bulk
inserts, deletes by key and by event time, overwrites), table services (compaction, clustering,
clean, archival) and added columns, on tables of both types and both one-group merge modes,
partitioned or not."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from lakecore import Table
from lakecore.services import ArchivalPolicy, CleanPolicy

SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.string())])

record = st.tuples(st.integers(0, 15), st.integers(0, 5), st.text("abc", min_size=1, max_size=3))
step = st.one_of(
    st.tuples(st.sampled_from(["upsert", "insert", "bulk_insert", "insert_overwrite"]),
              st.lists(record, min_size=1, max_size=8)),
    st.tuples(st.just("delete"),
              st.lists(st.tuples(st.integers(0, 15), st.one_of(st.none(), st.integers(0, 5))), min_size=1,
                       max_size=5)),
    st.tuples(st.sampled_from(["compact", "cluster", "clean", "archive", "add_column"]), st.just([])),
)
table_kind = st.fixed_dictionaries({
    "table_type": st.sampled_from(["merge_on_read", "copy_on_write"]),
    "ordering_field": st.sampled_from([None, "ts"]),
    "partition_fields": st.sampled_from([[], ["p"]]),
})


@contextmanager
def history(kind: dict[str, Any]) -> Iterator[History]:
    """A History on a table in a temporary directory (hypothesis runs many in one test)."""
    with tempfile.TemporaryDirectory() as d:
        yield History.create(f"{d}/t", kind)


def part(k: int) -> str:
    return f"p{k % 3}"


@dataclass
class History:
    """A table and the steps applied to it."""

    table: Table
    added: list[str] = field(default_factory=list)   # columns added so far (writes fill them)

    @classmethod
    def create(cls, uri: str, kind: dict[str, Any]) -> History:
        return cls(Table.create(uri, schema=SCHEMA, record_key="k", buckets=2, **kind))

    def run(self, steps: Sequence[tuple[str, list[Any]]]) -> Iterator[str]:
        """Apply `steps` one by one, yielding each step's op once the table has a completed instant."""
        for op, rows in steps:
            self.apply(op, rows)
            if self.table.timeline().completed:
                yield op

    def apply(self, op: str, rows: list[Any]) -> bool:
        """Run one step; False when it does not apply to this table (compaction of copy-on-write)."""
        t = self.table
        if op == "compact":
            return t.config.table_type == "merge_on_read" and t.maintenance.compact().done
        if op == "cluster":
            return t.maintenance.cluster().done
        if op == "clean":
            return t.maintenance.clean(CleanPolicy("keep_latest_commits", 1), dry_run=False).done
        if op == "archive":
            return t.maintenance.archive(ArchivalPolicy(min_instants=2, max_instants=3, fanout=2)).done
        if op == "add_column":
            name = f"c{len(self.added)}"
            t.add_columns([pa.field(name, pa.int32())])
            self.added.append(name)
            return True
        if op == "delete":
            for timed in (False, True):
                sub = [r for r in rows if (r[1] is not None) == timed]
                if sub:
                    cols: dict[str, Any] = {"k": pa.array([r[0] for r in sub], pa.int64()),
                                            "p": [part(r[0]) for r in sub]}
                    if timed:
                        cols["ts"] = pa.array([r[1] for r in sub], pa.int64())
                    t.delete(pa.table(cols))
            return True
        data = {"k": pa.array([r[0] for r in rows], pa.int64()), "p": [part(r[0]) for r in rows],
                "ts": pa.array([r[1] for r in rows], pa.int64()), "v": [r[2] for r in rows],
                **{c: pa.array([r[0] for r in rows], pa.int32()) for c in self.added}}
        t.write(pa.table(data), op)
        return True
