"""A Kafka writer whose brokers do not answer is not a crash loop: its attempt ends `unavailable` (exit 5),
the writer backs off with reason SourceUnavailable, a Warning Event names the brokers and why (a stopped
broker's port refuses the connection), and no restart budget is spent (maxRestarts 0 would end a failing
writer at once); when the broker returns, the next attempt reads the topic and the writer succeeds. The
same for a streaming writer whose broker goes away mid-run: its query fails, the attempt ends
`unavailable`, and once the broker is back the writer goes on from the offsets its last commit recorded,
each message landing once. Through `weir run -f` and the real broker, stopped and started again on the
same port."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lakecore import Table
from lakecore.errors import TableNotFound
from lakeoperator.dev.kafka import KafkaBroker
from tests.support.fixtures import require_spark_connectors
from tests.support.kafka_broker import create_topic, produce

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(700)]
ROOT = Path(__file__).resolve().parents[2]
TOPIC = "people"


def manifests(bootstrap: str, value: dict[str, Any] | None = None, *,
              streaming: bool = False) -> list[dict[str, Any]]:
    """A table and a batch (or streaming) writer from TOPIC (values: `value`, else JSON) that gives up at
    the first failure (maxRestarts 0) and backs off 2-4 s."""
    table = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable", "metadata": {"name": "people"},
             "spec": {"location": "lake/people", "recordKey": ["id"], "orderingField": "ts", "buckets": 1,
                      "schema": [{"name": "id", "type": "int64"}, {"name": "name", "type": "string"},
                                 {"name": "ts", "type": "int64"}]}}
    writer = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter", "metadata": {"name": "from-kafka"},
              "spec": {"tableRef": {"name": "people"}, "mode": "batch",
                       "source": {"kafka": {"bootstrapServers": bootstrap, "topics": [TOPIC],
                                            "options": {"default.api.timeout.ms": "3000",
                                                        # Kafka's admin client refuses a smaller default
                                                        "request.timeout.ms": "3000"},
                                            **({"value": value} if value else {})}},
                       "restartPolicy": {"maxRestarts": 0, "maxInfraRestarts": 0,
                                         "backoff": {"initialSeconds": 2, "maxSeconds": 4}},
                       "spark": {"mode": "local", "localCores": 1, "driver": {"memory": "512m"}}}}
    if streaming:
        writer["spec"] |= {"mode": "streaming", "trigger": {"intervalSeconds": 2}}
    return [table, writer]


def state(work: Path) -> dict[str, Any] | None:
    path = work / ".weir-run" / "resources" / "LakeWriter" / "default.from-kafka.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):   # not written yet, or being replaced
        return None


def wait_for(check: Callable[[], Any], run: subprocess.Popen[str], timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        assert run.poll() is None, f"weir run ended early ({run.returncode}): {run.communicate()}"
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout_s} s")


def start_weir_run(work: Path, docs: list[dict[str, Any]]) -> subprocess.Popen[str]:
    """`weir run -f m` in `work` with the manifests `docs`, as a process of this checkout."""
    (work / "m").mkdir()
    (work / "m" / "all.yaml").write_text("---\n".join(json.dumps(d) + "\n" for d in docs))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    weir = [sys.executable, "-c", "from lakeoperator.cli import app; app()"]
    return subprocess.Popen([*weir, "run", "-f", "m", "--timeout", "400"], cwd=work, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def backing_off(work: Path, run: subprocess.Popen[str]) -> dict[str, Any]:
    """The writer's kept state once it backs off after an attempt (within 240 s)."""
    def check() -> dict[str, Any] | None:
        s = state(work)
        status = (s or {}).get("body", {}).get("status", {})
        return s if status.get("phase") == "BackingOff" and status.get("history") else None

    return wait_for(check, run, 240)


def test_a_writer_backs_off_while_the_broker_is_down_and_goes_on_when_it_returns(
        tmp_path: Path, kafka_factory: Callable[[], KafkaBroker]) -> None:
    require_spark_connectors()
    broker = kafka_factory()
    create_topic(broker.bootstrap_servers, TOPIC)
    produce(broker.bootstrap_servers, TOPIC,
            [(str(i), json.dumps({"id": i, "name": f"p{i}", "ts": 1})) for i in range(20)])
    broker.stop()
    run = start_weir_run(tmp_path, manifests(broker.bootstrap_servers))
    try:
        kept = backing_off(tmp_path, run)
        status = kept["body"]["status"]
        said = (f"no Kafka broker at {broker.bootstrap_servers} answered ({broker.bootstrap_servers}: "
                "connection refused)")
        assert status["history"][-1]["cause"] == "unavailable" and status["history"][-1]["exitCode"] == 5
        assert status["attempts"]["failures"] == 0 and status["attempts"]["unavailable"] >= 1
        ready = {c["type"]: c for c in status["conditions"]}["Ready"]
        assert ready["reason"] == "SourceUnavailable" and said in ready["message"], ready
        assert "no restart budget is spent" in ready["message"]
        event = kept["events"][-1]
        assert (event["type"], event["reason"]) == ("Warning", "SourceUnavailable")
        assert said in event["message"]

        broker.start()
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, out[-3000:] + err[-3000:]
    assert "LakeWriter/from-kafka: Succeeded" in out, out
    final = state(tmp_path)
    assert final is not None and final["body"]["status"]["attempts"]["failures"] == 0
    rows = Table.open(str(tmp_path / "lake" / "people")).read()
    assert sorted(rows.column("id").to_pylist()) == list(range(20))


def people(n: int, start: int = 0) -> list[tuple[str, str]]:
    return [(str(i), json.dumps({"id": i, "name": f"p{i}", "ts": 1})) for i in range(start, start + n)]


def table_ids(work: Path) -> list[int] | None:
    try:
        return sorted(Table.open(str(work / "lake" / "people")).read().column("id").to_pylist())
    except TableNotFound:   # not created yet
        return None


def test_a_streaming_writer_whose_broker_goes_away_mid_run_backs_off_and_goes_on_when_it_returns(
        tmp_path: Path, kafka_factory: Callable[[], KafkaBroker]) -> None:
    require_spark_connectors()
    broker = kafka_factory()
    create_topic(broker.bootstrap_servers, TOPIC)
    produce(broker.bootstrap_servers, TOPIC, people(20))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "all.yaml").write_text(
        "---\n".join(json.dumps(d) + "\n" for d in manifests(broker.bootstrap_servers, streaming=True)))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    run = subprocess.Popen([sys.executable, "-c", "from lakeoperator.cli import app; app()", "run", "-f", "m",
                            "--follow", "--timeout", "500"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: table_ids(tmp_path) == list(range(20)), run, 240)
        broker.stop()

        def backing_off() -> dict[str, Any] | None:
            s = state(tmp_path)
            status = (s or {}).get("body", {}).get("status", {})
            assert status.get("phase") != "Failed", status   # a failure spends the budget: not this
            return s if status.get("phase") == "BackingOff" and status.get("history") else None

        status = wait_for(backing_off, run, 300)["body"]["status"]
        assert status["history"][-1]["cause"] == "unavailable", status["history"]
        assert status["attempts"]["failures"] == 0, status["attempts"]
        ready = {c["type"]: c for c in status["conditions"]}["Ready"]
        assert ready["reason"] == "SourceUnavailable", ready
        assert f"no Kafka broker at {broker.bootstrap_servers}" in ready["message"], ready

        broker.start()
        produce(broker.bootstrap_servers, TOPIC, people(20, start=20))
        wait_for(lambda: table_ids(tmp_path) == list(range(40)), run, 300)
        run.send_signal(signal.SIGINT)   # the way to end --follow
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, out[-3000:] + err[-3000:]
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    final = state(tmp_path)
    assert final is not None and final["body"]["status"]["attempts"]["failures"] == 0
