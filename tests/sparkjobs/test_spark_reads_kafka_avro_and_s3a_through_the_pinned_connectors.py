"""Local Spark gets the connectors of images/spark/jars/pom.xml (`make spark-jars`) on its classpath: it
reads a real Kafka topic (batch and streaming), decodes Avro with from_avro, and a writer job (a process of
its own, as the operator runs it) reads an s3a:// source on the moto S3 server into a table."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from sparkjobs.contract import EXIT_OK, BatchWriteArgs
from tests.support.fixtures import require_spark_connectors
from tests.support.kafka_broker import create_topic, produce

pytestmark = [pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]
AVRO = {"type": "record", "name": "reading", "fields": [{"name": "id", "type": "long"},
                                                         {"name": "v", "type": "string"}]}


@pytest.fixture(autouse=True)
def _connectors() -> None:
    require_spark_connectors()


@pytest.mark.kafka
def test_a_topic_reads_as_a_batch_and_as_a_stream(spark, kafka_broker, tmp_path):
    bootstrap = kafka_broker.bootstrap_servers
    create_topic(bootstrap, "connector-read", partitions=2)
    produce(bootstrap, "connector-read", [(str(i), json.dumps({"id": i})) for i in range(50)])

    batch = spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", "connector-read").load()
    assert sorted(json.loads(r["value"])["id"] for r in batch.collect()) == list(range(50))

    seen: list[int] = []
    stream = spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", "connector-read").option("startingOffsets", "earliest").load()
    query = stream.writeStream.foreachBatch(lambda df, _id: seen.append(df.count())) \
        .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    query.awaitTermination()
    assert sum(seen) == 50


def test_avro_values_decode_with_from_avro(spark):
    from pyspark.sql.avro.functions import from_avro
    from pyspark.sql.functions import col

    def encoded(record: dict) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO), record)
        return out.getvalue()

    df = spark.createDataFrame([(encoded({"id": i, "v": f"v{i}"}),) for i in range(3)], "value binary")
    rows = df.select(from_avro(col("value"), json.dumps(AVRO)).alias("r")).select("r.*").collect()
    assert [(r["id"], r["v"]) for r in rows] == [(0, "v0"), (1, "v1"), (2, "v2")]


@pytest.mark.s3
def test_a_writer_job_reads_an_s3a_source(spark, s3_server, tmp_path):
    bucket = f"weir-{uuid.uuid4().hex[:12]}"
    client = s3_server.client()
    client.create_bucket(Bucket=bucket)
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
    body = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(20)), "ts": [1] * 20, "v": ["s3"] * 20}, schema=schema), body)
    client.put_object(Bucket=bucket, Key="landing/part-0.parquet", Body=body.getvalue())
    table = Table.create(str(tmp_path / "t"), schema=schema, record_key="id", ordering_field="ts", buckets=2)

    args = BatchWriteArgs(table=table.uri, source=f"s3a://{bucket}/landing/", source_options={
        "fs.s3a.endpoint": s3_server.endpoint_url, "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false", "fs.s3a.endpoint.region": "us-east-1"})
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    done = subprocess.run([sys.executable, "-m", "sparkjobs.batch_write", *args.to_argv()], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines and done.returncode == EXIT_OK, (done.stdout[-2000:], done.stderr[-3000:])
    assert json.loads(lines[-1])["records"] == 20
    assert sorted(Table.open(table.uri).read().column("id").to_pylist()) == list(range(20))
