"""Seed scenario 000 on Kafka through the operator on a real API server (`make demo` runs the same manifests
on the local launcher, over Kafka too, and its test checks the same: tests/lakeoperator/dev): the
manifests of examples/demo/stitch (one wide table, three column groups, non-blocking concurrency, a
compaction after three delta commits) with each streaming writer reading a topic of its own; the events
each group's topic gets, out of order on the group's ordering field (shuffled, over two partitions and
three produce rounds: a later round holds older events too); what the table must be, computed here from
the messages sent (per group the event with the highest ordering field, joined on the key); and the
checks of the table the run left."""

from __future__ import annotations

import json
import random
import uuid
from pathlib import Path
from typing import Any

from lakecore import Table
from lakeoperator.dev.kafka import KafkaBroker
from lakeoperator.manifests import load_manifests
from tests.support.kafka_broker import create_topic, end_offsets, produce

ROOT = Path(__file__).resolve().parents[2]
GROUPS = {"telemetry": ("temperature", "humidity"), "location": ("site", "region"),
          "status": ("firmware", "healthy")}
DEVICES = [f"d{i:02d}" for i in range(15)]
WIDE = ["device", *(c for g, cs in GROUPS.items() for c in (*cs, f"{g}_ts"))]


def event(group: str, device: str, ts: int, rng: random.Random) -> dict[str, Any]:
    if group == "telemetry":
        values: dict[str, Any] = {"temperature": round(rng.uniform(15, 30), 1),
                                  "humidity": rng.randrange(30, 70)}
    elif group == "location":
        values = {"site": rng.choice(["paris", "tokyo", "austin"]), "region": rng.choice(["eu", "ap", "us"])}
    else:
        values = {"firmware": rng.choice(["1.3", "1.4"]), "healthy": rng.random() > 0.3}
    return {"device": device, **values, f"{group}_ts": ts}


def feed(broker: KafkaBroker, seed: int = 0) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Topics of this run's own, filled: (group -> topic, the expected table as device -> wide row)."""
    rng = random.Random(seed)
    run_id = uuid.uuid4().hex[:6]
    topics = {g: f"scenario-000-{g}-{run_id}" for g in GROUPS}
    expected: dict[str, dict[str, Any]] = {}
    for group, topic in topics.items():
        create_topic(broker.bootstrap_servers, topic, partitions=2)
        sent: list[dict[str, Any]] = []
        for _ in range(3):
            batch = [event(group, d, rng.randrange(1, 10_000), rng) for d in rng.sample(DEVICES, 10)]
            rng.shuffle(batch)
            produce(broker.bootstrap_servers, topic, [(e["device"], json.dumps(e)) for e in batch])
            sent += batch
        ts = f"{group}_ts"
        for e in sorted(sent, key=lambda e: e[ts]):   # the highest ordering value wins
            row = expected.setdefault(e["device"], {"device": e["device"]})
            row.update({c: e[c] for c in (*GROUPS[group], ts)})
    return topics, {d: {c: row.get(c) for c in WIDE} for d, row in expected.items()}


def manifests(location: str, topics: dict[str, str], bootstrap: str) -> list[dict[str, Any]]:
    """examples/demo/stitch with the table at `location` (storage lock) and each writer on its topic."""
    docs = load_manifests(ROOT / "examples" / "demo" / "stitch")
    for doc in docs:
        spec = doc["spec"]
        if doc["kind"] == "LakeTable":
            spec["location"] = location
            spec["lock"] = {"provider": "storage"}
        elif doc["kind"] == "LakeWriter":
            topic = topics[spec["columnGroup"]]
            spec["source"] = {"kafka": {"bootstrapServers": bootstrap, "topics": [topic]}}
    return docs


def check(location: str, topics: dict[str, str], expected: dict[str, dict[str, Any]],
          broker: KafkaBroker, namespace: str = "default") -> None:
    """The table is the join of each group's latest values, compacted once, and each writer's commit
    recorded its topic's end offsets."""
    table = Table.open(location)
    got = sorted(table.read().to_pylist(), key=lambda r: r["device"])
    assert [{c: r[c] for c in WIDE} for r in got] == [expected[d] for d in sorted(expected)]
    completed = table.timeline().completed
    assert [i.action for i in completed].count("compaction") == 1
    recorded = {}
    for i in completed:
        extra = table.commit_metadata(i).extra
        if "weir.kafka.offsets" in extra:
            recorded[extra["weir.writer"]] = json.loads(extra["weir.kafka.offsets"])
    assert sorted(recorded) == sorted(f"{namespace}/devices-{g}" for g in GROUPS)
    for group, topic in topics.items():
        ends = end_offsets(broker.bootstrap_servers, topic)
        assert recorded[f"{namespace}/devices-{group}"] == {topic: {str(p): o for p, o in ends.items()}}
