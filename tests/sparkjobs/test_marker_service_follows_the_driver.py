"""A writer job's marker service listens and is advertised where the Spark driver is (its
`spark.driver.bindAddress` / `spark.driver.host`), unless the job's arguments say otherwise, so tasks
on executors of other hosts call the driver and not themselves."""

from __future__ import annotations

from urllib.parse import urlsplit

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.table.writer import WriteJob
from sparkjobs.batch_write import writer_options
from sparkjobs.contract import BatchWriteArgs

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64())])


def test_the_job_takes_the_marker_host_from_the_spark_driver(spark, tmp_path):
    conf = spark.sparkContext.getConf()  # type: ignore[attr-defined]
    driver_host = conf.get("spark.driver.host")
    assert driver_host  # Spark always sets it when the context starts
    args = BatchWriteArgs(table="t", source="s", early_detection="marker_service")
    options = writer_options(args, "w", spark)
    assert options.markers.advertise_host == driver_host
    assert options.markers.bind_host == (conf.get("spark.driver.bindAddress") or driver_host)
    given = writer_options(BatchWriteArgs(table="t", source="s", marker_host="driver-svc.ns.svc",
                                          marker_bind_host="0.0.0.0"), "w", spark)
    assert (given.markers.bind_host, given.markers.advertise_host) == ("0.0.0.0", "driver-svc.ns.svc")
    # the library default (no Spark) stays on loopback
    assert writer_options(args, "w").markers.bind_host == "127.0.0.1"


def test_tasks_create_markers_through_the_advertised_service(spark, tmp_path, monkeypatch):
    from sparkjobs.write import write_dataframe

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    args = BatchWriteArgs(table=t.uri, source="s", early_detection="marker_service",
                          marker_bind_host="0.0.0.0", marker_host="127.0.0.2")
    options = writer_options(args, "w", spark)
    seen: list[str] = []
    real_start = WriteJob.start

    def start(*a, **kw):  # remember the URL the tasks are given
        job = real_start(*a, **kw)
        seen.append(job.context().markers.client.url)
        return job

    monkeypatch.setattr(WriteJob, "start", start)
    rows = pa.table({"id": list(range(20)), "ts": [1] * 20}, schema=SCHEMA)
    result = write_dataframe(spark.createDataFrame(rows), t, options=options)
    assert [urlsplit(u).hostname for u in seen] == ["127.0.0.2"]
    assert result.records == 20 and Table.open(t.uri).read().num_rows == 20
