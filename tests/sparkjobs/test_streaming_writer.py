"""Structured Streaming into a table: one micro-batch = one instant, exactly once across restarts
(a micro-batch Spark re-runs after our commit is skipped), several writers on one table."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def drop_file(directory, name, ids, ts):
    directory.mkdir(exist_ok=True)
    pq.write_table(pa.table({"id": list(ids), "ts": [ts] * len(ids), "v": [f"{i}@{ts}" for i in ids]},
                            schema=SCHEMA), directory / f"{name}.parquet")


def source(spark, directory):
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.readStream.schema(from_arrow_schema(SCHEMA)).option("maxFilesPerTrigger", 1) \
        .parquet(str(directory))


def latest(t: Table) -> dict[int, int]:
    return {r["id"]: r["ts"] for r in Table.open(t.uri).read(columns=["id", "ts"]).to_pylist()}


def test_micro_batches_commit_once_even_after_a_restart(spark, tmp_path):
    from sparkjobs.stream import BATCH_KEY, WRITER_KEY, BatchWriter, last_committed_batch, write_stream

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts",
                     concurrency_mode="non_blocking", buckets=2)
    incoming, checkpoint = tmp_path / "in", str(tmp_path / "checkpoint")
    drop_file(incoming, "a", range(0, 50), 1)
    drop_file(incoming, "b", range(25, 75), 2)
    query = write_stream(source(spark, incoming), t, writer_id="clicks", checkpoint=checkpoint,
                         trigger={"availableNow": True})
    query.awaitTermination(120)
    assert query.exception() is None
    writes = [i for i in Table.open(t.uri).timeline().completed if i.action == "deltacommit"]
    assert len(writes) == 2  # one instant per micro-batch (one file per trigger)
    assert [t.commit_metadata(i).extra[BATCH_KEY] for i in writes] == ["0", "1"]
    assert {t.commit_metadata(i).extra[WRITER_KEY] for i in writes} == {"clicks"}
    assert last_committed_batch(t, "clicks") == 1 and last_committed_batch(t, "other") is None

    # Spark re-runs batch 1 after a crash between our commit and its checkpoint: skipped
    again = BatchWriter(t, "clicks")
    again(spark.read.parquet(str(incoming / "b.parquet")), 1)
    assert again.skipped == [1] and not again.instants

    drop_file(incoming, "c", range(70, 80), 3)  # a restart of the query picks up only the new file
    query = write_stream(source(spark, incoming), t, writer_id="clicks", checkpoint=checkpoint,
                         trigger={"availableNow": True})
    query.awaitTermination(120)
    assert query.exception() is None
    expected = {i: 1 for i in range(25)} | {i: 2 for i in range(25, 70)} | {i: 3 for i in range(70, 80)}
    assert latest(t) == expected
    assert len([i for i in Table.open(t.uri).timeline().completed if i.action == "deltacommit"]) == 3


def test_two_streaming_writers_fill_one_table(spark, tmp_path):
    from sparkjobs.stream import last_committed_batch, write_stream

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts",
                     concurrency_mode="non_blocking", buckets=2)
    queries = []
    for name, ids, ts in (("left", range(0, 40), 5), ("right", range(20, 60), 7)):
        drop_file(tmp_path / name, "x", ids, ts)
        queries.append(write_stream(source(spark, tmp_path / name), t, writer_id=name,
                                    checkpoint=str(tmp_path / f"cp-{name}"), trigger={"availableNow": True}))
    for q in queries:
        q.awaitTermination(120)
        assert q.exception() is None
    assert latest(t) == {i: 5 for i in range(20)} | {i: 7 for i in range(20, 60)}
    assert last_committed_batch(t, "left") == 0 and last_committed_batch(t, "right") == 0
