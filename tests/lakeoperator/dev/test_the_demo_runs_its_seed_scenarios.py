"""`make demo` (python -m lakeoperator.dev.demo DIR --size small) runs the seed scenarios of examples/demo
on the local launcher with its own ZooKeeper, and what it leaves in DIR is right: the stitched table is
the join of each stream's latest values (and was compacted exactly once), over Kafka each streaming
writer's last commit recorded its topic's end offsets, the long delete lost a conflict decided
from outside, was restarted and succeeded, the erased orders are gone and every other ingested order is
there, and the timeline picture was written. Its progress never goes quiet while drivers start and write
(each writer's stage, its commits with their rows, a line at least every HEARTBEAT_S), its Spark drivers
start fast (C1 only, one GC thread, the class-data-sharing archive) without the tests' SPARK_SUBMIT_OPTS,
no line of librdkafka's comes among its own, and the commands it prints at the end run as printed. Every
Weir object of examples/demo parses."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from lakecore import Table
from lakeoperator.dev.demo import driver_start, weir_command
from lakeoperator.dev.demo_feeds import PARTITIONS, events, kafka_unavailable_reason
from lakeoperator.dev.demo_progress import HEARTBEAT_S
from lakeoperator.specs import parse_lake_table, parse_lake_writer, parse_table_service
from tests.support import spark_cds
from tests.support.fixtures import require, require_spark, require_zookeeper

pytestmark = pytest.mark.timeout(780)   # the module's demo run is set up in its first test
ROOT = Path(__file__).resolve().parents[3]
STREAMS = {"telemetry": ("temperature", "humidity"), "location": ("site", "region"),
           "status": ("firmware", "healthy")}


VENV_BIN = str(Path(sys.executable).parent)


def environment(home: Path, *, venv_on_path: bool = True) -> dict[str, str]:
    """As `make demo` runs it (the virtualenv's bin first on PATH), or as the user's shell is after make
    ended (`venv_on_path=False`: no virtualenv on PATH)."""
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != VENV_BIN]
    # the tests' drivers' SPARK_SUBMIT_OPTS left out (a user's shell has none): the demo sets its own
    inherited = {k: v for k, v in os.environ.items() if k != "SPARK_SUBMIT_OPTS"}
    return {**inherited, "HOME": str(home), "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
            "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}",
            "PATH": os.pathsep.join([VENV_BIN, *path] if venv_on_path else path)}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_spark()
    require_zookeeper()
    work = tmp_path_factory.mktemp("demo")
    home = tmp_path_factory.mktemp("home")
    env = environment(home)
    log = work / "demo.log"
    with open(log, "w") as out:
        demo = subprocess.Popen([sys.executable, "-m", "lakeoperator.dev.demo", str(work), "--size", "small"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)   # as make runs it
        try:
            code = demo.wait(timeout=600)   # a broker and five drivers on a loaded 2-core machine: ~7 min
        except subprocess.TimeoutExpired:
            demo.terminate()   # like Ctrl-C: the demo stops its drivers and its ZooKeeper
            code = demo.wait(timeout=60)
    output = log.read_text()
    assert code == 0, output[-5000:]
    assert "conflict decided from outside" in output
    # its drivers started as the tests' do (what the demo's test takes depends on it) ...
    assert driver_start(None, spark_cds.submit_options()) in output, output[:3000]
    # ... and no line of librdkafka's own came among the demo's (`%4|<time>|GETPID|rdkafka#producer-1| ...`)
    assert not re.search(r"^%\d\|", output, flags=re.M), output[:5000]
    (work / "demo-output.txt").write_text(output)
    return work


@pytest.mark.spark
@pytest.mark.zookeeper
@pytest.mark.slow
def test_the_streams_come_through_kafka_when_a_broker_can_start(demo: Path) -> None:
    require("A Kafka broker for the demo", kafka_unavailable_reason())
    output = (demo / "demo-output.txt").read_text()
    assert "the streams come through its topics" in output and "Kafka broker (pid" in output
    for name in ("devices-telemetry", "orders-ingest"):
        applied = yaml.safe_load(next((demo / "manifests").glob(f"*/lakewriter-{name}.yaml")).read_text())
        assert "kafka" in applied["spec"]["source"], applied
    streaming = {"devices": {f"default/devices-{s}": s for s in STREAMS},
                 "orders": {"default/orders-ingest": "orders"}}   # writer -> the stream it reads
    for table_name, writers in streaming.items():
        recorded = last_recorded_offsets(demo / "lake" / table_name)
        assert sorted(recorded) == sorted(writers), recorded
        for writer, stream in writers.items():
            assert offsets_sent_through(demo, stream, recorded[writer]), (writer, recorded[writer])


def last_recorded_offsets(location: Path) -> dict[str, dict[str, dict[str, int]]]:
    """Per writer, the Kafka offsets its last commit recorded (topic -> partition -> next offset)."""
    table = Table.open(str(location))
    recorded = {}
    for i in table.timeline().completed:
        extra = table.commit_metadata(i).extra
        if "weir.kafka.offsets" in extra:
            recorded[extra["weir.writer"]] = json.loads(extra["weir.kafka.offsets"])
    return recorded


def offsets_sent_through(demo: Path, stream: str, offsets: dict[str, dict[str, int]]) -> bool:
    """The offsets are the end of the topic the demo fed `stream` into: its one topic, every partition,
    summing to the messages sent (an offset cannot pass its partition's end, so the sum being the count
    sent means each partition's is its end offset: the broker is stopped, its end offsets are not asked)."""
    return list(offsets) == [stream] and sorted(offsets[stream]) == [str(p) for p in range(PARTITIONS)] \
        and sum(offsets[stream].values()) == len(events(demo, stream))


def writer_status(work: Path, name: str) -> dict[str, Any]:
    body = json.loads((work / "state" / "resources" / "LakeWriter" / f"default.{name}.json").read_text())
    return {"status": body["body"]["status"], "events": body["events"]}


@pytest.mark.spark
@pytest.mark.zookeeper
@pytest.mark.slow
def test_the_stitched_table_is_the_join_of_each_streams_latest_values(demo: Path) -> None:
    expected: dict[str, dict[str, Any]] = {}
    for stream, columns in STREAMS.items():
        latest: dict[str, dict[str, Any]] = {}
        for row in events(demo, stream):
            if row["device"] not in latest or latest[row["device"]][f"{stream}_ts"] < row[f"{stream}_ts"]:
                latest[row["device"]] = row
        for device, row in latest.items():
            expected.setdefault(device, {"device": device}).update(
                {c: row[c] for c in (*columns, f"{stream}_ts")})
    wide = ["device", *[c for s, cs in STREAMS.items() for c in (*cs, f"{s}_ts")]]
    expected_rows = [{c: expected[d].get(c) for c in wide} for d in sorted(expected)]
    table = Table.open(str(demo / "lake" / "devices"))
    got = sorted(table.read().to_pylist(), key=lambda r: str(r["device"]))
    assert [{c: r[c] for c in wide} for r in got] == expected_rows
    manifest = json.loads((demo / "state" / "resources" / "LakeTable" / "default.devices.json").read_text())
    assert manifest["body"]["spec"]["lock"]["provider"] == "zookeeper"   # its writes took ZooKeeper
    assert [i.action for i in table.timeline().completed] .count("compaction") == 1


@pytest.mark.spark
@pytest.mark.zookeeper
@pytest.mark.slow
def test_the_delete_is_stopped_from_outside_restarted_and_the_data_ends_right(demo: Path) -> None:
    erase = writer_status(demo, "orders-erase")
    conflict = erase["status"]["lastConflict"]
    assert conflict["role"] == "Lost" and conflict["decidedBy"] == "weir-operator", conflict
    assert [h["cause"] for h in erase["status"]["history"]] == ["conflict", "success"]
    assert erase["status"]["phase"] == "Succeeded"
    assert "ConflictLost" in [e["reason"] for e in erase["events"]]
    table = Table.open(str(demo / "lake" / "orders"))
    assert (demo / "lake" / "orders" / ".weir" / "aborted" / conflict["instant"]).exists()
    winner = table.timeline().find(conflict["other"])
    assert winner is not None and winner.is_completed
    assert table.commit_metadata(winner).extra.get("weir.writer") == "default/orders-ingest"
    assert writer_status(demo, "orders-ingest")["status"]["phase"] == "Suspended"
    # ... and the demo tells it in sentences (no Python list in its lines)
    output = (demo / "demo-output.txt").read_text()
    assert f"orders-erase: lost the conflict of its write {conflict['instant']} against write " \
           f"{conflict['other']} (default/orders-ingest) on file groups " in output, output[-4000:]
    assert "orders-erase: phase Succeeded; attempts ended: conflict, then success" in output
    assert "orders-ingest: phase Suspended; no attempt has ended" in output
    assert "['" not in output, output[-4000:]

    erased = set(pq.read_table(demo / "input" / "erasures").column("order_id").to_pylist())
    ingested = {r["order_id"]: r for r in events(demo, "orders")}
    got = {r["order_id"]: r for r in table.read().to_pylist()}
    assert erased & set(ingested), "the erasure request names orders the table held"
    assert not erased & set(got)
    assert got == {i: r for i, r in ingested.items() if i not in erased}


@pytest.mark.spark
@pytest.mark.zookeeper
@pytest.mark.slow
def test_the_demo_writes_the_timeline_picture(demo: Path) -> None:
    picture = demo / "timeline-orders.html"
    assert picture.exists() and picture.stat().st_size > 0


def progress_lines(output: str) -> list[tuple[float, str]]:
    """(seconds since start, text) of every progress line, from the progress rule to the outcome rule."""
    part = output[output.index(" progress "):output.index(" outcome ")]
    return [(float(m.group(1)), m.group(2)) for m in re.finditer(r"^\s*(\d+\.\d)s (.*)$", part, flags=re.M)]


@pytest.mark.spark
@pytest.mark.zookeeper
@pytest.mark.slow
def test_the_progress_never_goes_quiet_and_says_each_writers_stage(demo: Path) -> None:
    lines = progress_lines((demo / "demo.log").read_text())
    times = [t for t, _ in lines]
    quiet = [(a, b) for a, b in itertools.pairwise(lines) if b[0] - a[0] >= HEARTBEAT_S + 10]
    assert times and not quiet, quiet   # a step itself may take seconds on a loaded machine
    text = "\n".join(x for _, x in lines)
    for stream in STREAMS:
        writer = f"devices-{stream}"
        assert f"{writer}: Spark driver starting" in text, text
        assert re.search(rf"{writer}: (write \d{{17}} begun|writing \d{{17}}: \d+ file group)", text), text
        assert re.search(rf"devices: deltacommit \d{{17}} committed upsert, [\d,]+ rows? written, "
                         rf"by default/{writer}", text), text
    # the heartbeat line comes after HEARTBEAT_S without another: a run that never went that quiet (a
    # fast machine) needs none
    assert "still at work: " in text or all(b[0] - a[0] < HEARTBEAT_S for a, b in itertools.pairwise(lines))


@pytest.mark.spark
@pytest.mark.zookeeper
@pytest.mark.slow
def test_the_commands_it_prints_run_as_printed(demo: Path, tmp_path: Path) -> None:
    output = (demo / "demo.log").read_text()
    after = output[output.index("Look around"):].splitlines()
    commands = [line for line in after if line.split(" ", 1)[0].endswith("weir")]
    assert len(commands) == 8, after
    weir = weir_command(ROOT)   # .venv/bin/weir, the weir beside the interpreter, though make's PATH has it
    assert weir != "weir" and all(line.startswith(f"{weir} ") for line in commands), commands
    for command in commands:   # in the user's shell after `make demo`: no virtualenv on its PATH
        ran = subprocess.run(["bash", "-c", command], cwd=ROOT, env=environment(tmp_path, venv_on_path=False),
                             capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0 and ran.stdout, (command, ran.stdout[-2000:], ran.stderr[-2000:])


@pytest.mark.spark
@pytest.mark.zookeeper
@pytest.mark.slow
def test_its_tables_can_be_written_after_it(demo: Path) -> None:
    """The tables locked on the demo's ZooKeeper, which stops with it: `weir table compact` of one
    waited for the lock, then failed. They end on the storage lock, and say so."""
    output = (demo / "demo.log").read_text()
    said = "devices, orders: now on the storage lock, as ZooKeeper stops with the demo"
    assert said in output, output[-3000:]
    for name in ("devices", "orders"):
        table = Table.open(str(demo / "lake" / name))
        assert table.config.lock.provider == "storage"
        table.lock.acquire(10)   # what every write and service takes first: it can be had
        table.lock.release()


def test_every_weir_object_of_examples_demo_parses() -> None:
    parsers = {"LakeTable": parse_lake_table, "LakeWriter": parse_lake_writer,
               "TableService": parse_table_service}
    seen = []
    for scenario in ("stitch", "delete"):
        folder = ROOT / "examples" / "demo" / scenario
        assert (folder / "README.md").exists()
        for path in sorted(folder.glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                assert doc["apiVersion"] == "weir.dev/v1alpha1", path
                parsers[doc["kind"]](doc)
                seen.append((scenario, doc["kind"]))
    assert seen.count(("stitch", "LakeWriter")) == 3 and ("stitch", "TableService") in seen
    assert seen.count(("delete", "LakeWriter")) == 2
