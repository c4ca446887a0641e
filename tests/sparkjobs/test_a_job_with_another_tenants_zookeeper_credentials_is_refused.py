"""A write job started with another tenant's ZooKeeper credentials (WEIR_ZOOKEEPER_USERNAME/PASSWORD, as
the operator sets them from the LakeTable's credentialsSecret) is refused by the table's ACL: it exits
bad_input (2) naming the user and the remedy, and writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from lakecore.config import LockSpec
from sparkjobs.contract import EXIT_BAD_INPUT, BatchWriteArgs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


@pytest.mark.spark
@pytest.mark.zookeeper
def test_a_write_job_with_another_tenants_credentials_exits_bad_input(tmp_path, zookeeper_server):
    from lakecore.concurrency.zookeeper import (
        PASSWORD_ENV,
        USERNAME_ENV,
        Credentials,
        close_shared_clients,
        ensure_table_paths,
    )

    connect = zookeeper_server.connect_string
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                 lock=LockSpec("zookeeper", connect=connect))
    ensure_table_paths(connect, uri, credentials=Credentials("tenant-a", "a-secret"))  # the operator's part
    close_shared_clients()
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [1, 2], "ts": [5, 5], "v": ["a", "b"]}, schema=SCHEMA), source)
    args = BatchWriteArgs(table=uri, source=str(source), zookeeper=connect, early_detection="direct_zk")

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", USERNAME_ENV: "tenant-b", PASSWORD_ENV: "b-secret"}
    proc = subprocess.run([sys.executable, "-m", "sparkjobs.batch_write", *args.to_argv()], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stderr[-3000:]
    out = json.loads(lines[-1])
    assert proc.returncode == EXIT_BAD_INPUT and out["outcome"] == "bad_input", out
    assert out["error"].startswith("ZooKeeperAccessDenied: ") and "user 'tenant-b'" in out["error"], out
    assert "credentialsSecret" in out["error"] and "b-secret" not in proc.stdout + proc.stderr
    timeline = Table.open(uri).timeline()
    assert timeline.completed == () and timeline.pending == ()  # refused before any instant began
