"""The Spark writer's operations: insert_overwrite and insert_overwrite_table give the state lakecore's
own writer gives; an unknown operation is refused before any instant, by the job contract (bad-input
exit) and by write_dataframe (UnknownOperation)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.errors import UnknownOperation
from lakecore.write import OPERATIONS
from sparkjobs.contract import OPERATIONS as JOB_OPERATIONS
from sparkjobs.contract import BatchWriteArgs, InvalidJobArgs, StreamWriteArgs

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def data(ids, ts, days=("d1", "d2", "d3")):
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [days[i % len(days)] for i in ids],
                     "ts": pa.array([ts] * len(ids), pa.int64()), "v": [f"{i}@{ts}" for i in ids]},
                    schema=SCHEMA)


def state(t: Table):
    rows = Table.open(t.uri).read().select(SCHEMA.names).to_pylist()
    return sorted(rows, key=lambda r: (r["id"], r["day"]))


def test_the_contract_knows_lakecores_operations_and_refuses_others():
    assert JOB_OPERATIONS == OPERATIONS
    for name in ("overwrite", "append", "bogus"):
        with pytest.raises(InvalidJobArgs, match="not one of"):
            BatchWriteArgs("t", "s", operation=name)
        with pytest.raises(ValueError):
            BatchWriteArgs.from_argv(["--table", "t", "--source", "s", "--operation", name])
        with pytest.raises(InvalidJobArgs):
            StreamWriteArgs("t", "s", operation=name, writer_id="w", checkpoint="/c")
    assert BatchWriteArgs("t", "s", operation="insert_overwrite").operation == "insert_overwrite"


def test_the_batch_job_exits_bad_input_before_any_instant(tmp_path, capsys):
    from sparkjobs.batch_write import main
    from sparkjobs.contract import EXIT_BAD_INPUT

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    argv = ["--table", t.uri, "--source", str(tmp_path / "none"), "--operation", "append"]
    assert main(argv) == EXIT_BAD_INPUT
    assert "bad_input" in capsys.readouterr().out
    assert len(t.timeline()) == 0


@pytest.mark.spark
@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_spark_overwrites_what_lakecore_overwrites(spark, tmp_path, table_type):
    from sparkjobs.write import write_dataframe

    def make(name):
        return Table.create(str(tmp_path / name), schema=SCHEMA, record_key="id", partition_fields=["day"],
                            ordering_field="ts", table_type=table_type, buckets=4)
    by_spark, by_lakecore = make("spark"), make("lakecore")
    first = data(range(120), 1)
    # touches d1 and d2 only, and few keys: most of their file groups get no rows (empty base files)
    partial = data([0, 1, 3], 2, days=("d1", "d2"))
    whole = data([7, 8], 3)
    for op, batch in (("upsert", first), ("insert_overwrite", partial), ("insert_overwrite_table", whole)):
        result = write_dataframe(spark.createDataFrame(batch), by_spark, op)  # type: ignore[arg-type]
        by_lakecore.write(batch, op)  # type: ignore[arg-type]
        assert state(by_spark) == state(by_lakecore), op
        assert by_spark.commit_metadata(result.instant).operation == op
    assert [r["id"] for r in state(by_spark)] == [7, 8]
    assert not Table.open(by_spark.uri).timeline().pending
    with pytest.raises(UnknownOperation):
        write_dataframe(spark.createDataFrame(whole), by_spark, "bogus")  # type: ignore[arg-type]
    assert len(Table.open(by_spark.uri).timeline()) == 3


def test_a_streaming_writer_refuses_an_unknown_operation_before_it_starts(tmp_path):
    from sparkjobs.stream import BatchWriter

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2)
    with pytest.raises(UnknownOperation):
        BatchWriter(t, "w", "append")  # type: ignore[arg-type]
    assert len(t.timeline()) == 0


@pytest.mark.spark
def test_a_streaming_overwrite_micro_batch_commits_once_after_a_restart(spark, tmp_path):
    from sparkjobs.stream import BatchWriter, last_committed_batch

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", partition_fields=["day"], buckets=2)
    writer = BatchWriter(t, "w", "insert_overwrite")
    writer(spark.createDataFrame(data(range(6), 1)), 0)
    writer(spark.createDataFrame(data([0, 3], 2, days=("d1",))), 1)  # replaces d1 only
    assert last_committed_batch(t, "w") == 1
    again = BatchWriter(t, "w", "insert_overwrite")  # Spark re-runs batch 1 after a restart: skipped
    again(spark.createDataFrame(data([0, 3], 2, days=("d1",))), 1)
    assert again.skipped == [1] and not again.instants
    assert [(r["id"], r["day"]) for r in state(t)] == [(0, "d1"), (1, "d2"), (2, "d3"), (3, "d1"), (4, "d2"),
                                                       (5, "d3")]
    assert [i.action for i in Table.open(t.uri).timeline().completed] == ["replacecommit"] * 2
