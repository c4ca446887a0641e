"""Table.writes_after: how many writes completed after a timeline time, archived ones included, and the
time to count from next. TableService triggers count with it; counting the active timeline alone missed
every archived write, so a trigger larger than the active timeline (20-30 instants) never fired."""

from __future__ import annotations

import pyarrow as pa

from lakecore import Table, WriterOptions
from lakecore.services.archive import ArchivalPolicy
from lakecore.table.options import AfterCommitOptions

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64())])


def test_writes_after_counts_archived_and_active_writes(tmp_path):
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", table_type="merge_on_read")
    options = WriterOptions(after_commit=AfterCommitOptions(archival=ArchivalPolicy(min_instants=3,
                                                                                  max_instants=5)))
    t = Table.open(uri, options=options)
    assert t.writes_after() == (0, None)
    done = [t.upsert(pa.table({"id": [i % 4], "ts": [i]}, schema=SCHEMA)).instant for i in range(14)]
    timeline = Table.open(uri).timeline()
    assert timeline.archived.count >= 8, "the test means archived writes"
    completions = sorted(i.completion_time for i in Table.open(uri).archived_instants()) + \
        sorted(i.completion_time for i in timeline.completed)
    assert len(completions) == 14

    assert Table.open(uri).writes_after() == (14, completions[-1])
    # from inside the archived range, from the boundary, from the newest: each write counted once
    for k in (0, 3, timeline.archived.count - 1, timeline.archived.count, 13):
        count, through = Table.open(uri).writes_after(completions[k])
        assert (count, through) == (13 - k, completions[-1]), k
    assert done[-1].completion_time == completions[-1]


def test_only_writes_count(tmp_path):
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", table_type="merge_on_read")
    t.upsert(pa.table({"id": [1], "ts": [1]}, schema=SCHEMA))
    t.upsert(pa.table({"id": [1], "ts": [2]}, schema=SCHEMA))
    first = Table.open(uri).timeline().completed[0].completion_time
    assert t.maintenance.compact() is not None
    count, through = Table.open(uri).writes_after(first)
    assert count == 1   # the second upsert; the compaction is no write
    assert through == Table.open(uri).timeline().completed[1].completion_time
