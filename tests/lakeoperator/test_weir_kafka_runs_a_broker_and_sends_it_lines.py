"""`weir kafka broker` runs a real one-node broker on this machine until Ctrl-C (its temporary directory
removed after), and `weir kafka produce TOPIC FILE` sends it a file's lines, one message each, keyed by a
field: what a new user tries a Kafka LakeWriter with (examples/kafka). A walkthrough found no way to do
that short of the developer modules."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakeoperator.dev.kafka import kafka_missing_reason
from lakeoperator.dev.zookeeper import free_port
from tests.lakeoperator.test_weir_run_runs_cluster_manifests_on_this_machine import stop_drivers
from tests.support.fixtures import require

pytestmark = pytest.mark.kafka
ROOT = Path(__file__).resolve().parents[2]
WEIR = [sys.executable, "-c", "from lakeoperator.cli import app; app()"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HOME": str(tmp_path / "home"), "KUBECONFIG": str(tmp_path / "kubeconfig"),
            "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}", "COLUMNS": "200"}


def _weir(tmp_path: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*WEIR, *args], cwd=tmp_path, env=_env(tmp_path), input=stdin, capture_output=True,
                          text=True, timeout=120, check=False)


def _messages(bootstrap: str, topic: str, n: int) -> list[tuple[str | None, str]]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"t-{topic}",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got: list[tuple[str | None, str]] = []
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and m.error() is None:
                got.append((m.key().decode() if m.key() else None, m.value().decode()))
        return got
    finally:
        consumer.close()


def test_produce_sends_each_line_keyed_by_a_field(kafka_broker, tmp_path: Path) -> None:
    lines = ['{"order_id": 1, "amount": 1.5}', "", '{"order_id": 2, "amount": 2.5}', "not json"]
    (tmp_path / "orders.jsonl").write_text("\n".join(lines) + "\n")
    done = _weir(tmp_path, "kafka", "produce", "cli-orders", "orders.jsonl", "--key", "order_id",
                 "--bootstrap", kafka_broker.bootstrap_servers, "--partitions", "2")
    assert done.returncode == 0 and done.stdout.startswith("sent 3 message(s) to cli-orders"), done
    assert done.stderr == "", done.stderr   # librdkafka's retries are no news
    got = _messages(kafka_broker.bootstrap_servers, "cli-orders", 3)
    assert sorted(got, key=str) == sorted([("1", lines[0]), ("2", lines[2]), (None, "not json")], key=str)

    done = _weir(tmp_path, "kafka", "produce", "cli-orders", "-", "--key", "order_id",
                 "--bootstrap", kafka_broker.bootstrap_servers, stdin='{"amount": 3}\n')
    said = " ".join(done.stderr.split())
    assert done.returncode != 0 and "line 1 has no 'order_id' for its key" in said, done


def test_produce_to_no_broker_says_to_start_one(tmp_path: Path) -> None:
    (tmp_path / "one.jsonl").write_text('{"id": 1}\n')
    done = _weir(tmp_path, "kafka", "produce", "t", "one.jsonl", "--bootstrap", f"127.0.0.1:{free_port()}")
    said = " ".join(done.stderr.split())
    assert done.returncode != 0 and "is one running there (`weir kafka broker`)?" in said, done
    assert "Traceback" not in said, said


def test_the_broker_runs_until_ctrl_c_and_leaves_nothing(tmp_path: Path) -> None:
    require("A Kafka broker", kafka_missing_reason())
    port = free_port()
    proc = subprocess.Popen([*WEIR, "kafka", "broker", "--port", str(port)], cwd=tmp_path,
                            env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith(f"Kafka broker at 127.0.0.1:{port} (log: "), first
        log = Path(first.split("(log: ", 1)[1].split(")", 1)[0])
        assert log.exists()
        (tmp_path / "one.jsonl").write_text('{"id": 1}\n')
        done = _weir(tmp_path, "kafka", "produce", "t", "one.jsonl", "--bootstrap", f"127.0.0.1:{port}")
        assert done.returncode == 0, done
        busy = _weir(tmp_path, "kafka", "broker", "--port", str(port))
        assert busy.returncode != 0 and f"port {port} on 127.0.0.1 is in use" in " ".join(busy.stderr.split())
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0 and "stopped the broker" in rest, rest
        assert not log.parent.exists()   # its temporary directory
    finally:
        if proc.poll() is None:   # Ctrl-C first: the broker runs in a session of its own, which it stops
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.mark.spark
@pytest.mark.slow
def test_the_kafka_example_runs_as_its_readme_says(kafka_broker, tmp_path: Path) -> None:
    """examples/kafka on the session's broker (its address in place of 127.0.0.1:9092): orders 1 and 2
    land (1 at its second amount), the misspelt and the non-JSON message are skipped, counted and the
    first named in the commit and the driver's log."""
    from lakecore import Table

    example = ROOT / "examples" / "kafka"
    readme = (example / "README.md").read_text()
    for command in ("weir kafka broker", "weir kafka produce orders orders.jsonl --key order_id",
                    "weir run -f . --state /tmp/kafka-state --follow"):
        assert command in readme, command
    work = tmp_path / "kafka"
    shutil.copytree(example, work)
    writer = work / "writer.yaml"
    writer.write_text(writer.read_text().replace("127.0.0.1:9092", kafka_broker.bootstrap_servers))
    topic = f"orders-{free_port()}"   # a topic of this test's own
    writer.write_text(writer.read_text().replace("topics: [orders]", f"topics: [{topic}]"))
    sent = _weir(work, "kafka", "produce", topic, "orders.jsonl", "--key", "order_id",
                 "--bootstrap", kafka_broker.bootstrap_servers)
    assert sent.returncode == 0 and "sent 5 message(s)" in sent.stdout, sent
    env = {**_env(tmp_path), "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    state = work / ".weir-run"   # where stop_drivers looks
    said = tmp_path / "run.out"
    with said.open("w") as out:
        run = subprocess.Popen([*WEIR, "run", "-f", ".", "--state", str(state), "--follow"], cwd=work,
                               env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    lake = work / "lake" / "orders"
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and run.poll() is None:
            if lake.exists() and Table.open(str(lake)).timeline().completed:
                break
            time.sleep(1)
        assert run.poll() is None, said.read_text()[-3000:]
        run.send_signal(signal.SIGINT)
        run.wait(120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        assert stop_drivers(work) == []   # `weir run` stopped its driver itself
    table = Table.open(str(lake))
    rows = {r["order_id"]: r for r in table.read().to_pylist()}
    assert sorted(rows) == [1, 2] and str(rows[1]["amount"]) == "15.00", (rows, said.read_text()[-3000:])
    extra = table.commit_metadata(table.timeline().completed[-1]).extra
    assert extra["weir.kafka.skipped"] == "2", extra
    first = f"{topic}/0@3: field 'custmer' is no column; did you mean 'customer'?"
    assert extra["weir.kafka.first_bad"].startswith(first), extra
    logs = "".join(p.read_text() for p in (state / "pods-state" / "logs").rglob("*.log"))
    assert "2 of the batch's 5 Kafka messages are bad (skipped)" in logs, logs[-3000:]
