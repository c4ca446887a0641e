"""kill -9 of a Kafka writer's job (a process of its own, as the operator runs it) at the two points that
matter, then a restart: every message's effect is in the table exactly once.

- after our commit, before Spark records the micro-batch in its checkpoint: Spark runs the micro-batch
  again after the restart, and the writer skips it (its batch id is committed);
- in the middle of a micro-batch (its files written, its instant not complete; Spark's checkpoint has
  planned it): the restart writes it again, and the dead instant's files are never read.

Each message has a key of its own, so the rows the commits wrote add up to the messages exactly when none
was lost or written twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.timeline import WRITE_ACTIONS
from sparkjobs.contract import EXIT_OK
from sparkjobs.kafka.offsets import OFFSETS_KEY, decode
from sparkjobs.stream import COMMITTED_PAUSE_ENV
from sparkjobs.write import PAUSE_ENV
from tests.sparkjobs.kafka.support import new_topic, send_json, stream_args
from tests.support.fixtures import require_spark_connectors
from tests.support.kafka_broker import end_offsets

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.crash, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("v", pa.string())])


@pytest.fixture(autouse=True)
def _connectors() -> None:
    require_spark_connectors()


def start(args, tmp_path: Path, **env: str) -> subprocess.Popen[str]:
    full = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", **env}
    with open(tmp_path / f"job-{time.monotonic_ns()}.log", "w") as log:   # the process keeps its own copy
        return subprocess.Popen([sys.executable, "-m", "sparkjobs.stream_write", *args.to_argv()], cwd=ROOT,
                                env=full, stdout=log, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)


def kill_when(proc: subprocess.Popen[str], reached: Path, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not list(reached.glob("reached-*")):
        assert proc.poll() is None, f"the job ended ({proc.returncode}) before its pause point"
        assert time.monotonic() < deadline, "the job never reached its pause point"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def finish(args, tmp_path: Path) -> None:
    proc = start(args, tmp_path)
    assert proc.wait(timeout=240) == EXIT_OK


def written_once(table: Table, topic: str, broker) -> None:
    t = Table.open(table.uri)
    # the writes only: with non-blocking concurrency the killed attempt is rolled back lazily, once its
    # heartbeat is stale, so its rollback instant may complete after the last write
    commits = [t.commit_metadata(i) for i in t.timeline().completed if i.action in WRITE_ACTIONS]
    assert sum(c.records for c in commits) == 60, [c.records for c in commits]   # none twice, none lost
    assert sorted(r["id"] for r in t.read().to_pylist()) == list(range(60))
    recorded = decode(commits[-1].extra[OFFSETS_KEY])
    assert recorded == {topic: end_offsets(broker.bootstrap_servers, topic)}


def hold(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "hold").touch()
    return folder


def test_killed_after_the_commit_before_the_checkpoint(spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "kill-committed")
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    args = stream_args(table, kafka_broker, topic, str(tmp_path / "cp"))
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "a"} for i in range(40)])
    pause = hold(tmp_path, "committed")

    kill_when(start(args, tmp_path, **{COMMITTED_PAUSE_ENV: str(pause)}), pause)

    assert len(Table.open(table.uri).timeline().completed) == 1                  # our commit landed
    assert not (tmp_path / "cp" / "commits" / "0").exists()                      # Spark's did not
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "b"} for i in range(40, 60)])
    finish(args, tmp_path)
    written_once(table, topic, kafka_broker)


def test_killed_in_the_middle_of_a_micro_batch(spark, kafka_broker, tmp_path):
    topic = new_topic(kafka_broker, "kill-mid")
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                         concurrency_mode="non_blocking")
    args = stream_args(table, kafka_broker, topic, str(tmp_path / "cp"))
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "a"} for i in range(40)])
    pause = hold(tmp_path, "tasks")

    kill_when(start(args, tmp_path, **{PAUSE_ENV: str(pause)}), pause)

    assert not Table.open(table.uri).timeline().completed                         # nothing committed
    assert (tmp_path / "cp" / "offsets" / "0").exists()                           # Spark planned it
    send_json(kafka_broker, topic, [{"id": i, "ts": 1, "v": "b"} for i in range(40, 60)])
    finish(args, tmp_path)
    written_once(table, topic, kafka_broker)
