"""Clustering rewrites each chosen file group into one sorted base file without changing any answer:
the snapshot, read-optimized reads, time travel to before it and incremental reads stay the same,
for copy-on-write and merge-on-read tables of every merge mode (column groups and deletes too); the
new base files are sorted and their row groups' min/max statistics do not overlap."""

import itertools

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from lakecore.concurrency import view_of
from lakecore.services import ClusteringStrategy
from tests.lakecore.services.conftest import (
    changes,
    cluster,
    create,
    file_counts,
    keys,
    rows,
    snapshot,
)
from tests.lakecore.services.test_compaction_preserves_every_read import _history, net

MODES = ["event_time", "commit_time", "partial_update"]
TYPES = ["merge_on_read", "copy_on_write"]


def _sort_column(mode: str) -> str:
    return "country" if mode == "partial_update" else "name"


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("mode", MODES)
def test_clustering_changes_no_answer(tmp_path, mode, table_type):
    t = create(str(tmp_path / "t"), mode, table_type=table_type)
    instants = _history(t, mode)
    before = snapshot(t)
    past = {i.requested_time: snapshot(t, as_of=i.requested_time) for i in instants}
    first, last = instants[0].requested_time, instants[-1].requested_time
    incremental = [changes(t, a.requested_time, b.requested_time) for a, b in itertools.pairwise(instants)]

    done = cluster(t, ClusteringStrategy("all", (_sort_column(mode),)))
    assert done is not None and done.action == "replacecommit"
    meta = t.commit_metadata(done)
    assert meta.operation == "clustering" and {s.kind for s in meta.write_stats} == {"base"}
    assert meta.extra["sort_columns"] == [_sort_column(mode)]
    assert {(r["partition"], r["file_id"]) for r in meta.extra["replaced"]} == meta.file_groups
    assert file_counts(t) == [1] * len(file_counts(t))
    assert snapshot(t) == before
    assert snapshot(t, query="read_optimized") == before  # one base file holds each group's whole state
    for instant_time, expected in past.items():
        assert snapshot(t, as_of=instant_time) == expected   # time travel before the clustering
    assert incremental == [changes(t, a.requested_time, b.requested_time)
                           for a, b in itertools.pairwise(instants)]
    assert net(changes(t, first)) == net(changes(t, first, last))
    assert snapshot(t, as_of=done.requested_time) == before

    more = _history(t, mode)   # writes merge over the clustered base files (logs or new bases)
    after = snapshot(t)
    cluster(t, ClusteringStrategy("all"))
    assert snapshot(t) == after
    assert snapshot(t, as_of=more[-1].requested_time) == after


def _row_group_ranges(t: Table, path: str, column: str) -> list[tuple]:
    fs, root = t.storage.arrow()
    meta = pq.ParquetFile(f"{root}/{path}", filesystem=fs).metadata
    idx = meta.schema.to_arrow_schema().get_field_index(column)
    return [(meta.row_group(i).column(idx).statistics.min, meta.row_group(i).column(idx).statistics.max)
            for i in range(meta.num_row_groups)]


@pytest.mark.parametrize("table_type", TYPES)
def test_new_base_files_are_sorted_in_prunable_row_groups(tmp_path, table_type):
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("score", pa.float64()),
                                                            ("city", pa.string())]),
                     record_key="id", table_type=table_type, buckets=2)
    n = 400
    ids = list(range(n))
    for part in (ids[::2], ids[1::2]):   # two writes: two files per group (MOR) or two bases (COW)
        t.upsert(pa.table({"id": pa.array(part, pa.int64()),
                           "score": pa.array([float((i * 7919) % n) for i in part]),
                           "city": [f"c{i % 13:02d}" for i in part]}))
    t.delete(pa.table({"id": pa.array([0, 1, 2], pa.int64())}))
    before = snapshot(t)
    done = cluster(t, ClusteringStrategy("all", ("score",), row_group_rows=25))
    assert done is not None and snapshot(t) == before
    for stat in t.commit_metadata(done).write_stats:
        data = pq.read_table(f"{tmp_path}/t/{stat.path}")
        live = data.filter(pc.equal(data.column("_weir_op"), 0))
        scores = live.column("score").to_pylist()
        assert scores == sorted(scores)
        ranges = [r for r in _row_group_ranges(t, stat.path, "score") if r[0] is not None]
        assert len(ranges) > 4
        assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges))   # disjoint: min/max prune
    hits = t.read(filter=pc.field("score") >= 390.0)
    assert sorted(hits.column("score").to_pylist()) == [float(s) for s in range(390, 400)
                                                        if s in {r["score"] for r in before}]


def test_sorting_is_stable_and_by_several_columns(tmp_path):
    t = create(str(tmp_path / "t"), "event_time", table_type="copy_on_write")
    t.upsert(rows(list(range(40)), [i % 3 for i in range(40)], [f"n{i % 4}" for i in range(40)]))
    cluster(t, ClusteringStrategy("all", ("ts", "name")))
    for s in view_of(t.storage, t.timeline()).slices:
        assert s.base is not None
        data = pq.read_table(f"{tmp_path}/t/{s.base.path}", columns=["id", "ts", "name"]).to_pylist()
        assert data == sorted(data, key=lambda r: (r["ts"], r["name"]))


def test_small_files_leaves_big_single_base_groups_alone(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(20)), 1))
    cluster(t, ClusteringStrategy("all"))
    assert file_counts(t) == [1, 1]
    assert cluster(t, ClusteringStrategy(small_file_bytes=1)) is None   # nothing small, nothing to do
    t.upsert(rows([0, 1, 2], 2))
    assert max(file_counts(t)) == 2
    done = cluster(t, ClusteringStrategy(small_file_bytes=1))
    assert done is not None and file_counts(t) == [1, 1]
    t.delete(keys([5]))
    assert 5 not in {r["id"] for r in snapshot(t)}


def test_a_completed_clustering_that_is_the_latest_write_can_be_rolled_back(tmp_path):
    t = create(str(tmp_path / "t"), "event_time")
    t.upsert(rows(list(range(10)), 1))
    t.upsert(rows([1, 2], 2))
    before, files = snapshot(t), file_counts(t)
    done = cluster(t, ClusteringStrategy("all", ("name",)))
    assert done is not None
    t.maintenance.rollback(done.requested_time, dry_run=False)
    assert snapshot(t) == before and file_counts(t) == files
    assert not [f for f in t.storage.list_dir("") if done.requested_time in f.path]
