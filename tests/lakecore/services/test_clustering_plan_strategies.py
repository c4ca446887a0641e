"""Clustering planning is pure: strategies choose file groups from a view, sort columns are checked
against the table schema, and the plan round-trips as JSON with strict parsing."""

import json

import pyarrow as pa
import pytest

from lakecore import TableConfig
from lakecore.errors import CorruptMetadata, InvalidClusteringStrategy, InvalidInput
from lakecore.layout import FileSlice, FileSystemView, LogFile
from lakecore.services import ClusteringOperation, ClusteringPlan, ClusteringStrategy, plan_clustering
from lakecore.timeline import WriteStat

CONFIG = TableConfig(name="t", schema=pa.schema([("id", pa.int64()), ("ts", pa.int64()),
                                                 ("tags", pa.list_(pa.string()))]), record_key=("id",))


def sl(file_id, log_bytes, base_bytes=None, partition="p=1"):
    base = None if base_bytes is None else \
        WriteStat(partition, file_id, f"{file_id}_0-0-0_20260101000000000.parquet", "base", 1, 0, base_bytes)
    logs = tuple(LogFile(WriteStat(partition, file_id, f".{file_id}_2026010100000{i:04d}.log.1_0-0-0", "log",
                                   1, 0, b), f"2026010100000{i:04d}", f"2026010100001{i:04d}")
                 for i, b in enumerate(log_bytes))
    return FileSlice(partition, file_id, "20260101000000000" if base else None, base, logs)


# a: big base + logs; b: logs only; c: one big base; d: one small base; e: big base, another partition
VIEW = FileSystemView((sl("a", [10, 10], 1000), sl("b", [500]), sl("c", [], 1000), sl("d", [], 50),
                       sl("e", [], 2000, partition="p=2")))


def chosen(strategy):
    return [op.file_id for op in plan_clustering(VIEW, CONFIG, strategy)]


def test_small_files_takes_slices_with_several_files_or_a_small_base():
    assert chosen(ClusteringStrategy(small_file_bytes=100)) == ["a", "b", "d"]
    assert chosen(ClusteringStrategy(small_file_bytes=1500)) == ["a", "b", "c", "d"]
    assert chosen(ClusteringStrategy(small_file_bytes=0)) == ["a", "b"]


def test_all_takes_every_file_group_with_data():
    assert chosen(ClusteringStrategy("all")) == ["a", "b", "c", "d", "e"]


def test_max_groups_prefers_the_most_files_then_the_smallest_and_keeps_file_order():
    assert chosen(ClusteringStrategy("all", max_groups=2)) == ["a", "d"]
    assert chosen(ClusteringStrategy("all", max_groups=3)) == ["a", "b", "d"]


def test_an_operation_names_the_slice_files_in_merge_order():
    op = plan_clustering(VIEW, CONFIG, ClusteringStrategy("all", max_groups=1))[0]
    assert op.base_instant == "20260101000000000" and op.bytes == 1020
    assert op.paths() == ["p=1/a_0-0-0_20260101000000000.parquet", "p=1/.a_20260101000000000.log.1_0-0-0",
                          "p=1/.a_20260101000000001.log.1_0-0-0"]


def test_sort_columns_must_be_sortable_table_columns():
    plan_clustering(VIEW, CONFIG, ClusteringStrategy(sort_columns=("ts", "id")))
    with pytest.raises(InvalidClusteringStrategy, match="'nope' is not a column of table 't'; use some"):
        plan_clustering(VIEW, CONFIG, ClusteringStrategy(sort_columns=("nope",)))
    with pytest.raises(InvalidClusteringStrategy, match="'tags' has type"):
        plan_clustering(VIEW, CONFIG, ClusteringStrategy(sort_columns=("tags",)))
    assert issubclass(InvalidClusteringStrategy, InvalidInput)
    assert ClusteringStrategy(sort_columns="ts").sort_columns == ("ts",)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw", [{"kind": "biggest"}, {"max_groups": 0}, {"row_group_rows": 0},
                                {"small_file_bytes": -1}, {"sort_columns": ("ts", "ts")},
                                {"max_groups": True}])
def test_bad_strategies_are_refused_with_a_clear_error(kw):
    with pytest.raises(InvalidClusteringStrategy):
        ClusteringStrategy(**kw)


def test_plan_round_trips_and_corruption_is_reported_with_a_remedy():
    strategy = ClusteringStrategy("small_files", ("ts",), 100, 3, 1000)
    plan = ClusteringPlan("20260101000000123", plan_clustering(VIEW, CONFIG, strategy), strategy)
    assert ClusteringPlan.loads(plan.dumps()) == plan
    assert plan.file_groups == {("p=1", "a"), ("p=1", "b"), ("p=1", "d")}
    obj = json.loads(plan.dumps())
    broken = [plan.dumps()[:40], b"", b"[]", b"\xff\xfe",
              json.dumps({**obj, "operations": [{"partition": "p=1"}]}).encode(),
              json.dumps({**obj, "strategy": {**obj["strategy"], "sort_columns": "ts"}}).encode(),
              json.dumps({**obj, "strategy": {**obj["strategy"], "kind": "biggest"}}).encode(),
              json.dumps({**obj, "operations": [{**obj["operations"][0], "log_files": [1]}]}).encode(),
              json.dumps({k: v for k, v in obj.items() if k != "strategy"}).encode()]
    for data in broken:
        with pytest.raises(CorruptMetadata, match="rollback_clustering"):
            ClusteringPlan.loads(data, source="plan of clustering X")


def test_a_logs_only_operation_has_no_base():
    op = ClusteringOperation("", "b", None, None, (".b_20260101000000000.log.1_0-0-0",))
    assert op.paths() == [".b_20260101000000000.log.1_0-0-0"]
    assert ClusteringOperation.from_json(op.to_json()) == op
