"""The Spark batch writer: one DataFrame = one instant, file groups written by Spark tasks through
lakecore, the same table state as lakecore's own writer gives for the same rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.concurrency.conflicts.early import EarlyDetection
from lakecore.errors import EarlyConflict, MissingColumn, NullKey
from lakecore.table import ConflictOptions, WriteJob, WriterOptions
from lakecore.write import combine_and_route, conform, list_markers, write_file_group

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def data(ids, ts, days=("d1", "d2", "d3")):
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [days[i % len(days)] for i in ids],
                     "ts": pa.array([ts + (i % 3) for i in ids], pa.int64()),
                     "v": [f"{i}@{ts}" for i in ids]}, schema=SCHEMA)


def frame(spark, table: pa.Table):
    return spark.createDataFrame(table)  # from Arrow: int columns with nulls stay int64


def state(t: Table):
    out = Table.open(t.uri).read().select(SCHEMA.names).to_pylist()
    return sorted(out, key=lambda r: (r["id"], r["day"]))


def files(t: Table):
    return sorted(f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir"))


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_spark_writes_what_lakecore_writes(spark, tmp_path, table_type):
    from sparkjobs.write import write_dataframe

    def make(name):
        return Table.create(str(tmp_path / name), schema=SCHEMA, record_key="id", partition_fields=["day"],
                            ordering_field="ts", table_type=table_type, buckets=4)
    by_spark, by_lakecore = make("spark"), make("lakecore")
    first, second = data(range(300), 10), data(list(range(150, 500)) + list(range(0, 40)), 5)
    for batch in (first, second):
        result = write_dataframe(frame(spark, batch), by_spark, "upsert", extra={"source": "test"})
        by_lakecore.upsert(batch)
        assert by_spark.commit_metadata(result.instant).extra == {"source": "test"}
        assert list_markers(by_spark.storage, result.instant.requested_time) == []
    assert state(by_spark) == state(by_lakecore)
    assert len(state(by_spark)) == 500
    gone = data([3, 4, 5, 400], 99).select(["id", "day", "ts"])  # deletes: key, partition, ordering
    write_dataframe(frame(spark, gone), by_spark, "delete")
    by_lakecore.delete(gone)
    assert state(by_spark) == state(by_lakecore) and len(state(by_spark)) == 496
    assert not Table.open(by_spark.uri).timeline().pending


def test_bad_input_fails_before_anything_is_written(spark, tmp_path):
    from sparkjobs.write import write_dataframe

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    write_dataframe(frame(spark, data(range(10), 1)), t)
    before, listed = state(t), files(t)
    instants = len(Table.open(t.uri).timeline().instants)
    with pytest.raises(MissingColumn):
        write_dataframe(frame(spark, data(range(5), 2).drop_columns(["ts"])), t)
    nulls = data(range(5), 2).set_column(0, "id", pa.array([1, None, 3, 4, 5], pa.int64()))
    with pytest.raises(NullKey, match="null"):  # found by a task: the write is rolled back
        write_dataframe(frame(spark, nulls), t)
    fresh = Table.open(t.uri)
    assert state(t) == before and files(t) == listed and not fresh.timeline().pending
    assert len([i for i in fresh.timeline().instants if i.action != "rollback"]) == instants


def test_an_early_conflict_stops_the_spark_write_and_reports(spark, tmp_path):
    from sparkjobs.write import write_dataframe

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1)
    t.upsert(data([1], 1))
    older = WriteJob.start(t.storage, t.config, t.lock, "upsert")
    rows = conform(data([1, 2], 2), t.config, "upsert").rows
    older_stats = [s for g in combine_and_route(rows, t.config, "upsert")
                   for s in write_file_group(older.context(), g)]
    with pytest.raises(EarlyConflict) as caught:
        write_dataframe(frame(spark, data(range(3, 50), 3)), t,
                        options=WriterOptions(conflicts=ConflictOptions(early_detection=EarlyDetection("direct"))))
    report = caught.value.report()
    assert report["other"] == older.instant.requested_time
    assert report["file_groups"] == [["", older_stats[0].file_id]]
    older.commit(older_stats)
    assert [r["id"] for r in state(t)] == [1, 2]
    assert not Table.open(t.uri).timeline().pending
