"""Planning is pure: strategies choose slices from a file-system view; the plan round-trips as JSON."""

import pyarrow as pa
import pytest

from lakecore import TableConfig
from lakecore.errors import CorruptMetadata
from lakecore.layout import FileSlice, FileSystemView, LogFile
from lakecore.services import CompactionOperation, CompactionPlan, CompactionStrategy, plan_compaction
from lakecore.timeline import WriteStat

CONFIG = TableConfig(name="t", schema=pa.schema([("id", pa.int64())]), record_key=("id",))


def sl(file_id, log_bytes, base_bytes=None, partition="p=1"):
    base = None if base_bytes is None else \
        WriteStat(partition, file_id, f"{file_id}_0-0-0_20260101000000000.parquet", "base", 1, 0, base_bytes)
    logs = tuple(LogFile(WriteStat(partition, file_id, f".{file_id}_2026010100000{i:04d}.log.1_0-0-0", "log",
                                   1, 0, b), f"2026010100000{i:04d}", f"2026010100001{i:04d}")
                 for i, b in enumerate(log_bytes))
    return FileSlice(partition, file_id, "20260101000000000" if base else None, base, logs)


VIEW = FileSystemView((sl("a", [10, 10, 10], 100), sl("b", [500]), sl("c", [], 300), sl("d", [40, 40], 50)))


def chosen(strategy):
    return [op.file_id for op in plan_compaction(VIEW, CONFIG, strategy)]


def test_all_takes_every_slice_with_logs_and_only_those():
    assert chosen(CompactionStrategy()) == ["a", "b", "d"]


def test_log_count_and_log_size_thresholds():
    assert chosen(CompactionStrategy("log_count", min_logs=2)) == ["a", "d"]
    assert chosen(CompactionStrategy("log_count", min_logs=4)) == []
    assert chosen(CompactionStrategy("log_size", min_log_bytes=80)) == ["b", "d"]


def test_bounded_io_takes_largest_logs_first_until_the_budget():
    assert chosen(CompactionStrategy("bounded_io", io_budget_bytes=1)) == ["b"]
    assert chosen(CompactionStrategy("bounded_io", io_budget_bytes=501)) == ["b", "d"]
    assert chosen(CompactionStrategy("bounded_io", io_budget_bytes=10_000)) == ["a", "b", "d"]


def test_operations_name_the_base_and_the_logs_in_slice_order():
    op = plan_compaction(VIEW, CONFIG)[0]
    assert op.base_file == "a_0-0-0_20260101000000000.parquet" and op.base_instant == "20260101000000000"
    assert op.log_files == tuple(lf.stat.file_name for lf in VIEW.slices[0].logs)
    assert op.paths()[0] == "p=1/a_0-0-0_20260101000000000.parquet"
    assert plan_compaction(VIEW, CONFIG)[1].base_file is None


def test_plan_json_round_trip_and_corrupt_plans_say_what_to_do():
    plan = CompactionPlan("20261122000000000", plan_compaction(VIEW, CONFIG), "all")
    assert CompactionPlan.loads(plan.dumps()) == plan
    assert CompactionOperation.from_json(plan.operations[1].to_json()) == plan.operations[1]
    with pytest.raises(CorruptMetadata, match="rollback_compaction"):
        CompactionPlan.loads(plan.dumps()[:-5])
