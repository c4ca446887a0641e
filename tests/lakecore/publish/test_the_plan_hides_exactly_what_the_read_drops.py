"""The plan of a published snapshot lists data files and, per file, the rows to hide; reading each
listed file and keeping the rows not hidden gives exactly `Table.read()` (the merged snapshot) or
`Table.read(query="read_optimized")` (base files), over random write histories. The positions come
from lakecore's own merged read, so this holds for every history the merge handles; merging the slices
of a partition in one call (as a full publish does) gives each slice's positions exactly."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore import ColumnGroup, Table
from lakecore.concurrency import view_of
from lakecore.errors import NotPublishable
from lakecore.merge import conform
from lakecore.publish.plan import choose_view, plan_publish
from lakecore.read.positions import FileRows, shown_rows, shown_rows_of_slices
from lakecore.read.slices import disjoint
from tests.lakecore.publish.histories import history, step, table_kind


def shown(table: Table, view: str) -> pa.Table:
    """The rows a reader of the planned snapshot sees: each file's rows minus its hidden ones."""
    timeline = table.timeline()
    base_only = view == "read_optimized"
    view_now = view_of(table.storage, timeline)
    plan = plan_publish(table.config, table.schema, timeline.last_completed(), view_now, view,
                        lambda slices: [shown_rows(table.storage, table.config, s, base_only=base_only)
                                        for s in slices])
    parts = [table.schema.empty_table()]
    for f in plan.files:
        data = pq.read_table(f"{table.uri}/{f.path}")
        keep = np.ones(f.rows, dtype=bool)
        keep[f.hidden] = False
        assert data.num_rows == f.rows
        parts.append(conform(data.filter(pa.array(keep)), table.schema))
    return pa.concat_tables(parts)


def same(got: pa.Table, want: pa.Table) -> bool:
    return got.sort_by("k").equals(want.sort_by("k"))


@settings(max_examples=60, deadline=None)
@given(table_kind, st.lists(step, min_size=1, max_size=8))
def test_shown_rows_are_the_rows_weir_reads(kind, steps):
    with history(kind) as h:
        for op in h.run(steps):
            assert same(shown(h.table, "snapshot"), h.table.read()), f"snapshot after {op}"
            assert same(shown(h.table, "read_optimized"), h.table.read(query="read_optimized")), \
                f"read-optimized after {op}"


def test_column_group_tables_publish_their_compacted_view(tmp_path):
    schema = pa.schema([("k", pa.int64()), ("clicks", pa.int64()), ("click_ts", pa.int64()),
                        ("country", pa.string()), ("dim_ts", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="k", buckets=2,
                     column_groups=[ColumnGroup("clicks", ("clicks",), "click_ts"),
                                    ColumnGroup("dims", ("country",), "dim_ts")])
    t.upsert(pa.table({"k": [1, 2, 3], "clicks": [10, 20, 30], "click_ts": [1, 1, 1]}))
    t.upsert(pa.table({"k": [2, 3, 4], "country": ["de", "fr", "it"], "dim_ts": [5, 5, 5]}))
    t.maintenance.compact()
    t.upsert(pa.table({"k": [1], "clicks": [11], "click_ts": [2]}))  # in a log: not in the compacted view
    assert choose_view(t.config, None) == "read_optimized"
    got = shown(t, "read_optimized").rename_columns(["k", *schema.names[1:]])
    assert got.sort_by("k").equals(t.read(query="read_optimized").sort_by("k"))
    with pytest.raises(NotPublishable, match=r"column groups.*read_optimized"):
        choose_view(t.config, "snapshot")


def test_column_defaults_are_refused_since_no_target_shows_them(tmp_path):
    schema = pa.schema([("k", pa.int64()), ("clicks", pa.int64()), ("ts", pa.int64()),
                        ("country", pa.string())])
    groups = [ColumnGroup("clicks", ("clicks",), "ts"), ColumnGroup("dims", ("country",), "ts")]
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="k", column_defaults={"clicks": 0},
                     column_groups=groups)
    t.upsert(pa.table({"k": [4], "country": ["it"], "ts": [5]}))
    t.maintenance.compact()
    with pytest.raises(NotPublishable, match=r"column_defaults \['clicks'\].*would show null"):
        choose_view(t.config, None)


def same_positions(together: list[tuple[FileRows, ...]], alone: list[tuple[FileRows, ...]]) -> bool:
    return len(together) == len(alone) and all(
        [(r.stat.path, r.rows) for r in a] == [(r.stat.path, r.rows) for r in b]
        and all(np.array_equal(x.shown, y.shown) for x, y in zip(a, b, strict=True))
        for a, b in zip(together, alone, strict=True))


@settings(max_examples=40, deadline=None)
@given(table_kind, st.lists(step, min_size=1, max_size=8))
def test_slices_merged_together_show_the_rows_each_shows_alone(kind, steps):
    with history(kind) as h:
        for op in h.run(steps):
            t = h.table
            if t.config.merge_mode == "partial_update":
                continue
            partitions: dict[str, list] = {}
            for s in view_of(t.storage, t.timeline()).slices:
                partitions.setdefault(s.partition, []).append(s)
            for slices in partitions.values():
                together = shown_rows_of_slices(t.storage, t.config, slices)
                alone = [shown_rows(t.storage, t.config, s) for s in slices]
                assert same_positions(together, alone), f"after {op}"


def test_slices_sharing_a_key_are_not_merged_together(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("k", pa.int64()), ("v", pa.int64())]),
                     record_key="k")
    one, other = pa.table({"k": [1, 2], "v": [0, 0]}), pa.table({"k": [3, 2], "v": [0, 0]})
    assert not disjoint([[one], [other]], t.config)
    assert disjoint([[one], [other.slice(0, 1)]], t.config)
