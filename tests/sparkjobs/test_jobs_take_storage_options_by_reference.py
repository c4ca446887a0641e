"""The jobs (and the weir data source) reach a table in S3 (moto) with storage options given by
reference only: the name of an environment variable or of a mounted JSON file, never a secret on the
command line. Each job runs as the operator runs it (a process of its own, its own local Spark) with
no AWS_* variables: the credentials and endpoint exist only where the reference points, and the Spark
tasks that write data files resolve the same reference in their own processes. A task closure the
writer pickles carries no secret."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from lakecore.storage import OptionsRef
from sparkjobs.contract import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    BatchWriteArgs,
    StreamWriteArgs,
    TableServiceArgs,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
SECRET = f"s3cr3t-{uuid.uuid4().hex}"  # moto takes any credentials: a unique one to search for
VARIABLE = "WEIR_TABLE_STORAGE"


def run_job(module: str, args, reference: dict[str, str] | None = None) -> tuple[int, dict]:
    """The job as a process whose environment holds no AWS_* variable; `reference`: what the job's
    reference names (extra environment variables)."""
    argv = args.to_argv()
    assert not any(SECRET in a for a in argv), argv
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != VARIABLE}
    env.update(PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", **(reference or {}))
    proc = subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stderr[-3000:]
    assert SECRET not in proc.stdout and SECRET not in proc.stderr
    return proc.returncode, json.loads(lines[-1])


@pytest.fixture
def s3_table(s3_server) -> tuple[str, dict]:
    """(URI, options with our secret) of a new merge-on-read table in a new bucket."""
    bucket = f"weir-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=bucket)
    options = {**s3_server.s3fs_options(), "secret": SECRET}
    uri = f"s3://{bucket}/tables/t"
    Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                 storage_options=options)
    return uri, options


def rows(ids: range, ts: int) -> pa.Table:
    return pa.table({"id": list(ids), "ts": [ts] * len(ids), "v": [str(ts)] * len(ids)}, schema=SCHEMA)


def test_the_contract_takes_storage_options_by_reference_only():
    args = BatchWriteArgs(table="s3://b/t", source="/in", storage_options_env=VARIABLE,
                          storage_options_file="/etc/weir/storage.json",
                          storage_options={"endpoint_url": "http://minio:9000"},
                          marker_host="driver-svc", marker_bind_host="0.0.0.0")
    assert BatchWriteArgs.from_argv(args.to_argv()) == args
    service = TableServiceArgs(table="t", service="clean", storage_options_file="/etc/weir/storage.json")
    assert TableServiceArgs.from_argv(service.to_argv()) == service
    for secret in ({"secret": SECRET}, {"key": "AKIA..."}, {"client_kwargs": "{}"}, {"token": "t"}):
        with pytest.raises(ValueError, match="may hold secrets") as err:
            BatchWriteArgs(table="t", source="s", storage_options=secret)
        assert SECRET not in str(err.value)
    pasted = json.dumps({"secret": SECRET})  # the options pasted where their variable's name goes
    with pytest.raises(ValueError, match="NAME of an environment variable") as err:
        TableServiceArgs.from_argv(["--table", "t", "--service", "clean", "--storage-options-env", pasted])
    assert SECRET not in str(err.value)


@pytest.mark.spark
@pytest.mark.s3
def test_a_task_closure_the_writer_pickles_holds_the_reference_not_the_secret(s3_table, monkeypatch):
    from pyspark import cloudpickle

    from lakecore.table.writer import WriteJob
    from sparkjobs.write import _write

    uri, options = s3_table
    monkeypatch.setenv(VARIABLE, json.dumps(options))
    for given, leaks in ((options, True), (OptionsRef(env=VARIABLE), False)):
        t = Table.open(uri, storage_options=given)
        with WriteJob.start(t.storage, t.config, t.lock, "upsert", t.options) as job:
            closure = cloudpickle.dumps(_write(job.context(), "upsert"))
        assert (SECRET.encode() in closure) is leaks


@pytest.mark.spark
@pytest.mark.s3
def test_batch_write_reaches_s3_through_a_variable(spark, s3_table, tmp_path):
    uri, options = s3_table
    source = tmp_path / "in.parquet"
    pq.write_table(rows(range(0, 40), 1), source)
    args = BatchWriteArgs(table=uri, source=str(source), storage_options_env=VARIABLE)
    code, out = run_job("sparkjobs.batch_write", args, {VARIABLE: json.dumps(options)})
    assert code == EXIT_OK and out["records"] == 40, out
    got = {r["id"]: r["ts"] for r in Table.open(uri, storage_options=options).read().to_pylist()}
    assert got == {i: 1 for i in range(40)}


@pytest.mark.spark
@pytest.mark.s3
def test_stream_write_reaches_s3_through_a_variable(spark, s3_table, tmp_path):
    uri, options = s3_table
    incoming = tmp_path / "stream"
    incoming.mkdir()
    for n in range(2):
        pq.write_table(rows(range(n * 10, n * 10 + 20), n), incoming / f"{n}.parquet")
    args = StreamWriteArgs(table=uri, source=str(incoming), writer_id="w1", checkpoint=str(tmp_path / "cp"),
                           available_now=True, max_files_per_trigger=1, storage_options_env=VARIABLE)
    code, out = run_job("sparkjobs.stream_write", args, {VARIABLE: json.dumps(options)})
    assert code == EXIT_OK and out["last_batch"] == 1, out
    got = {r["id"]: r["ts"] for r in Table.open(uri, storage_options=options).read().to_pylist()}
    assert got == {i: 0 for i in range(10)} | {i: 1 for i in range(10, 30)}


@pytest.mark.spark
@pytest.mark.s3
def test_a_table_service_reaches_s3_through_a_mounted_file(spark, s3_table, tmp_path):
    uri, options = s3_table
    t = Table.open(uri, storage_options=options)
    for ts in range(3):
        t.upsert(rows(range(20), ts))
    mounted = tmp_path / "secret-volume" / "storage.json"  # a Kubernetes Secret's key, mounted
    mounted.parent.mkdir()
    mounted.write_text(json.dumps({k: v for k, v in options.items() if k != "endpoint_url"}))
    args = TableServiceArgs(table=uri, service="compaction", storage_options_file=str(mounted),
                            storage_options={"endpoint_url": options["endpoint_url"]})
    code, out = run_service(args)
    assert code == EXIT_OK and out["outcome"] == "done" and out["operations"] == 2, out
    fresh = Table.open(uri, storage_options=options)
    assert fresh.timeline().find(out["instant"]).is_completed
    assert {r["id"]: r["ts"] for r in fresh.read().to_pylist()} == {i: 2 for i in range(20)}
    # the weir data source takes the same reference (its reader is pickled into Spark's workers)
    read = spark.read.format("weir").option("storageOptionsFile", str(mounted)) \
        .option("storage.endpoint_url", options["endpoint_url"]).load(uri)
    assert {r["id"]: r["ts"] for r in read.collect()} == {i: 2 for i in range(20)}


def run_service(args) -> tuple[int, dict]:
    return run_job("sparkjobs.table_service", args)


@pytest.mark.s3
def test_a_reference_that_does_not_resolve_is_bad_input(s3_table, tmp_path):
    uri, _ = s3_table
    code, out = run_job("sparkjobs.batch_write", BatchWriteArgs(table=uri, source=str(tmp_path),
                                                                storage_options_env=VARIABLE))
    assert code == EXIT_BAD_INPUT and "InvalidStorageOptions" in out["error"], out
    assert f"{VARIABLE} that should hold the storage options is not set" in out["error"]
    garbled = tmp_path / "storage.json"
    garbled.write_text(f"secret: {SECRET}")
    code, out = run_service(TableServiceArgs(table=uri, service="clean", storage_options_file=str(garbled)))
    assert code == EXIT_BAD_INPUT and "is not JSON" in out["error"], out
