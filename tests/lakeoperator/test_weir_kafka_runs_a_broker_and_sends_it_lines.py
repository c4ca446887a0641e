"""`weir kafka broker` runs a real one-node broker on this machine until Ctrl-C (its temporary directory
removed after), and `weir kafka produce TOPIC FILE` sends it a file's lines, one message each, keyed by a
field: what a new user tries a Kafka LakeWriter with (examples/kafka). A walkthrough found no way to do
that short of the developer modules."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lakeoperator.dev.kafka import kafka_missing_reason
from lakeoperator.dev.zookeeper import free_port
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
    assert done.returncode != 0 and "is a broker running there (`weir kafka broker`)?" in said, done
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
