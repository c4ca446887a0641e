"""The jobs as the operator runs them (batch write, table service): a command line built from the
contract, a process of their own with their own local Spark, one JSON line and an exit code that
says what happened."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from sparkjobs.contract import EXIT_BAD_INPUT, EXIT_OK, BatchWriteArgs, StreamWriteArgs, TableServiceArgs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def run_job(args, tmp_path, module="sparkjobs.batch_write", **env_extra: str) -> tuple[int, dict]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", **env_extra}
    proc = subprocess.run([sys.executable, "-m", module, *args.to_argv()], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stderr[-3000:]
    return proc.returncode, json.loads(lines[-1])


def test_contract_round_trips_and_refuses_nonsense():
    args = BatchWriteArgs(table="s3://b/t", source="/in", source_format="json", operation="insert",
                          source_options={"multiLine": "true"}, zookeeper="127.0.0.1:2181",
                          early_detection="direct_zk", max_rows_per_file=1000, extra={"run": "7"})
    assert BatchWriteArgs.from_argv(args.to_argv()) == args
    assert BatchWriteArgs.from_argv(["--table", "t", "--source", "s"]) == BatchWriteArgs("t", "s")
    for bad in (dict(operation="merge"), dict(early_detection="psychic"), dict(early_detection="direct_zk"),
                dict(max_rows_per_file=0)):
        with pytest.raises(ValueError):
            BatchWriteArgs("t", "s", **bad)


@pytest.mark.spark
def test_the_job_writes_a_parquet_input_and_reports(spark, tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=4)
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": list(range(100)), "ts": [1] * 100, "v": [str(i) for i in range(100)]},
                            schema=SCHEMA), source)
    code, out = run_job(BatchWriteArgs(table=t.uri, source=str(source), extra={"batch": "b1"}), tmp_path)
    assert code == EXIT_OK, out
    assert out["outcome"] == "committed" and out["records"] == 100 and out["file_groups"] == 4
    fresh = Table.open(t.uri)
    assert fresh.read().num_rows == 100
    assert fresh.commit_metadata(fresh.timeline().get(out["instant"])).extra == {"batch": "b1"}


def test_a_missing_table_is_bad_input(tmp_path):
    code, out = run_job(BatchWriteArgs(table=str(tmp_path / "nope"), source=str(tmp_path)), tmp_path)
    assert code == EXIT_BAD_INPUT and out["outcome"] == "bad_input" and "TableNotFound" in out["error"]


def run_service(args, tmp_path) -> tuple[int, dict]:
    return run_job(args, tmp_path, "sparkjobs.table_service")


def test_service_contract_round_trips_and_refuses_nonsense():
    args = TableServiceArgs(table="t", service="clustering", zookeeper="127.0.0.1:2181",
                            clustering_strategy="all", sort_columns=("a", "b"), clean_retained=5,
                            archive_min_instants=5, archive_max_instants=9)
    assert TableServiceArgs.from_argv(args.to_argv()) == args
    for bad in (dict(service="vacuum"), dict(service="archival", archive_min_instants=30)):
        with pytest.raises(ValueError):
            TableServiceArgs(table="t", **bad)


@pytest.mark.spark
def test_the_service_job_compacts_and_says_when_there_is_nothing_to_do(spark, tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    for ts in range(3):
        t.upsert(pa.table({"id": list(range(20)), "ts": [ts] * 20, "v": ["x"] * 20}, schema=SCHEMA))
    code, out = run_service(TableServiceArgs(table=t.uri, service="compaction"), tmp_path)
    assert code == EXIT_OK and out["outcome"] == "done" and out["operations"] == 2, out
    assert Table.open(t.uri).timeline().find(out["instant"]).is_completed
    code, out = run_service(TableServiceArgs(table=t.uri, service="archival"), tmp_path)
    assert code == EXIT_OK and out["instant"] is None  # 4 instants: nothing due
    cow = Table.create(str(tmp_path / "cow"), schema=SCHEMA, record_key="id", table_type="copy_on_write")
    code, out = run_service(TableServiceArgs(table=cow.uri, service="compaction"), tmp_path)
    assert code == EXIT_BAD_INPUT and "NotMergeOnRead" in out["error"]


@pytest.mark.spark
def test_a_damaged_data_file_is_not_retried_and_named(spark, tmp_path):
    """Bytes that do not decode stay bad on every retry: the job ends bad input (no restart loop) and
    its error names the file, so the status and Event quote it."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1)
    for ts in range(2):
        t.upsert(pa.table({"id": list(range(20)), "ts": [ts] * 20, "v": ["x"] * 20}, schema=SCHEMA))
    log = next(p for p in (tmp_path / "t").rglob(".*.log.*") if p.is_file())
    data = bytearray(log.read_bytes())
    data[-12:-8] = b"\xff\xff\xff\x7f"   # the footer's length: garbled, the file's size unchanged
    log.write_bytes(bytes(data))
    code, out = run_service(TableServiceArgs(table=t.uri, service="compaction"), tmp_path)
    assert code == EXIT_BAD_INPUT and out["outcome"] == "bad_input", out
    assert "DamagedFile" in out["error"] and log.name in out["error"], out


def test_stream_contract_needs_a_writer_id_and_a_checkpoint():
    args = StreamWriteArgs(table="t", source="/in", writer_id="w1", checkpoint="/cp", trigger_seconds=2.5,
                           max_files_per_trigger=3)
    assert StreamWriteArgs.from_argv(args.to_argv()) == args
    assert StreamWriteArgs.from_argv([*args.to_argv(), "--available-now", "false"]) == args
    for bad in (dict(writer_id=""), dict(checkpoint=""), dict(available_now=True)):
        with pytest.raises(ValueError):
            StreamWriteArgs(**{**dict(table="t", source="/in", writer_id="w1", checkpoint="/cp",
                                      trigger_seconds=1.0), **bad})
    with pytest.raises(ValueError, match="unrecognized"):
        StreamWriteArgs.from_argv(["--table", "t", "--source", "s", "--bogus", "1"])


@pytest.mark.spark
def test_the_stream_job_writes_what_is_there_and_stops(spark, tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                     concurrency_mode="non_blocking")
    incoming = tmp_path / "in"
    incoming.mkdir()
    for n in range(2):
        pq.write_table(pa.table({"id": list(range(n * 10, n * 10 + 20)), "ts": [n] * 20,
                                 "v": [str(n)] * 20}, schema=SCHEMA), incoming / f"{n}.parquet")
    args = StreamWriteArgs(table=t.uri, source=str(incoming), writer_id="w1",
                           checkpoint=str(tmp_path / "cp"), available_now=True, max_files_per_trigger=1)
    code, out = run_job(args, tmp_path, "sparkjobs.stream_write")
    assert code == EXIT_OK and out["outcome"] == "stopped" and out["last_batch"] == 1, out
    assert len(out["instants"]) == 2
    assert Table.open(t.uri).read().num_rows == 30


@pytest.mark.spark
@pytest.mark.zookeeper
def test_the_job_takes_the_zookeeper_lock_and_reports_an_early_conflict(spark, tmp_path, zookeeper_server):
    from lakecore.concurrency.locks.zookeeper import zookeeper_lock
    from lakecore.concurrency.zookeeper import table_lock_key
    from lakecore.config import LockSpec
    from lakecore.table.writer import WriteJob
    from lakecore.write import combine_and_route, conform, write_file_group
    from sparkjobs.contract import EXIT_CONFLICT

    connect = zookeeper_server.connect_string
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                 lock=LockSpec("zookeeper", connect=connect))
    t = Table.open(uri, lock=zookeeper_lock(connect, table_lock_key(uri)))
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "ts": [5, 5, 5], "v": ["a", "b", "c"]}, schema=SCHEMA), source)
    args = BatchWriteArgs(table=uri, source=str(source), zookeeper=connect, early_detection="direct_zk")

    older = WriteJob.start(t.storage, t.config, t.lock, "upsert")  # a live writer on the one file group
    rows = conform(pa.table({"id": [9], "ts": [1], "v": ["z"]}, schema=SCHEMA), t.config, "upsert").rows
    for group in combine_and_route(rows, t.config, "upsert"):
        write_file_group(older.context(), group)
    code, out = run_job(args, tmp_path)
    assert code == EXIT_CONFLICT and out["early"] is True, out
    assert out["other"] == older.instant.requested_time and out["instant"] != out["other"]
    older.abort()

    code, out = run_job(args, tmp_path)  # the other writer is gone: the job commits under the ZK lock
    assert code == EXIT_OK and out["records"] == 3, out
    assert sorted(r["id"] for r in Table.open(uri).read().to_pylist()) == [1, 2, 3]


def test_writer_options_follow_the_arguments():
    from lakecore.concurrency.liveness.writers import ZooKeeperWriterRegistry
    from sparkjobs.batch_write import writer_options

    plain = writer_options(BatchWriteArgs("t", "s"))
    assert plain.registration.registry is None and plain.conflicts.early_detection is None
    assert plain.files.max_rows_per_file is None
    zk = writer_options(BatchWriteArgs("t", "s", zookeeper="127.0.0.1:2181", early_detection="direct_zk",
                                       max_rows_per_file=500), "ingest-1")
    assert isinstance(zk.registration.registry, ZooKeeperWriterRegistry)
    assert zk.registration.writer_name == "ingest-1"
    early = zk.conflicts.early_detection
    assert early.strategy == "direct_zk" and early.zookeeper == "127.0.0.1:2181"
    assert zk.files.max_rows_per_file == 500


def test_a_service_job_exits_busy_while_another_run_holds_the_service(tmp_path):
    from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
    from lakecore.concurrency.liveness.runs import ARCHIVAL, ServiceRun
    from sparkjobs.contract import EXIT_BUSY

    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    with t.lock:
        held = ServiceRun.claim(t.storage, t.lock, ARCHIVAL, "archival", HeartbeatConfig())
    with held:  # another live job (here: this test process) is archiving the table
        code, out = run_service(TableServiceArgs(table=t.uri, service="archival"), tmp_path)
    assert code == EXIT_BUSY and out["outcome"] == "busy" and "ServiceRunning" in out["error"], out
    code, out = run_service(TableServiceArgs(table=t.uri, service="archival"), tmp_path)
    assert code == EXIT_OK, out


def test_the_outcome_line_is_also_the_termination_message(tmp_path, monkeypatch):
    """What the operator reads from the pod's status (a service run's instant): the same JSON line,
    cut to Kubernetes' 4096 bytes and still JSON when an error is long."""
    message = tmp_path / "termination-log"
    code, out = run_job(TableServiceArgs(table=str(tmp_path / "nope"), service="clean"), tmp_path,
                        module="sparkjobs.table_service", WEIR_TERMINATION_LOG=str(message))
    assert code == EXIT_BAD_INPUT and json.loads(message.read_text()) == out

    from sparkjobs import entry

    monkeypatch.setenv(entry.TERMINATION_LOG_ENV, str(message))
    long = json.dumps({"outcome": "failed", "error": "x\u00e9" * 5000, "instant": None, "other": [1] * 900})
    entry._terminate_with(long)
    cut = message.read_bytes()
    assert len(cut) <= entry.MESSAGE_BYTES
    assert json.loads(cut)["outcome"] == "failed" and json.loads(cut)["error"].startswith("x\u00e9x")
