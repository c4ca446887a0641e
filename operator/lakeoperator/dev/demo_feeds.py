"""Where the demo's streams come from: Kafka topics on a broker of the demo's own when Java can start one
(and Spark's Kafka connector and the Python Kafka client are here), else files under the work directory.

A stream is named by the last part of its writer's `source.path` in examples/demo (`input/telemetry` is
the stream `telemetry`). `source(stream, format)` is the LakeWriter's source block for it; `send(stream,
rows, part)` hands it one batch of events: a JSON or Parquet file `input/<stream>/<part>` (written under a
hidden name, then renamed, so a streaming reader never sees half a file), or JSON messages keyed by
the record key on the topic `<stream>` (created with the source block, before any writer starts: a
writer refuses a topic that does not exist), each batch also kept as JSON lines in `sent/<stream>/<part>.json`
for whoever checks the outcome (`events` reads either back). Must not decide what the events are (demo.py
does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

from lakeoperator.dev.kafka import KafkaBroker, kafka_missing_reason

PARTITIONS = 2


class Feed(Protocol):
    name: str

    def source(self, stream: str, fmt: str) -> dict[str, Any]: ...

    def send(self, stream: str, rows: list[dict[str, Any]], part: str, key: str) -> None: ...


class FileFeed:
    name = "files"

    def __init__(self, work: Path) -> None:
        self.work = work
        self.formats: dict[str, str] = {}

    def source(self, stream: str, fmt: str) -> dict[str, Any]:
        self.formats[stream] = fmt
        return {"format": fmt, "path": str(self.work / "input" / stream)}

    def send(self, stream: str, rows: list[dict[str, Any]], part: str, key: str) -> None:
        folder = self.work / "input" / stream
        folder.mkdir(parents=True, exist_ok=True)
        fmt = self.formats.get(stream, "json")
        tmp = folder / f".{part}.{fmt}.tmp"   # Spark skips hidden files
        if fmt == "parquet":
            pq.write_table(pa.Table.from_pylist(rows), tmp)
        else:
            tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
        tmp.rename(folder / f"{part}.{fmt}")


class KafkaFeed:
    name = "Kafka topics"

    def __init__(self, broker: KafkaBroker, work: Path) -> None:
        self.broker = broker
        self.work = work

    def source(self, stream: str, fmt: str) -> dict[str, Any]:
        from lakeoperator.dev.kafka_client import create_topic

        create_topic(self.broker.bootstrap_servers, stream, partitions=PARTITIONS)
        return {"kafka": {"bootstrapServers": self.broker.bootstrap_servers, "topics": [stream]}}

    def send(self, stream: str, rows: list[dict[str, Any]], part: str, key: str) -> None:
        from lakeoperator.dev.kafka_client import produce

        lines = [json.dumps(r) for r in rows]
        produce(self.broker.bootstrap_servers, stream,
                ((str(r[key]), line) for r, line in zip(rows, lines, strict=True)))
        kept = self.work / "sent" / stream
        kept.mkdir(parents=True, exist_ok=True)
        (kept / f"{part}.json").write_text("".join(line + "\n" for line in lines))


def events(work: Path, stream: str) -> list[dict[str, Any]]:
    """Every event the demo sent on `stream`, batch after batch, whichever feed carried it."""
    rows: list[dict[str, Any]] = []
    for path in sorted([*(work / "sent" / stream).glob("*.json"), *(work / "input" / stream).glob("*.*")]):
        if path.suffix == ".parquet":
            rows += pq.read_table(path).to_pylist()
        else:
            rows += [json.loads(line) for line in path.read_text().splitlines() if line]
    return rows


def kafka_unavailable_reason() -> str | None:
    """Why the demo cannot feed Kafka here, or None if it can."""
    from lakeoperator.dev.kafka_client import client_missing_reason
    from sparkjobs.jars import connectors_missing_reason

    return kafka_missing_reason() or connectors_missing_reason() or client_missing_reason()


def start_feed(console: Console, work: Path, *, kafka_wanted: bool = True) -> tuple[Feed, KafkaBroker | None]:
    """Kafka when it can (a broker of the demo's own, stopped by the caller), else files; says which."""
    reason = "--files" if not kafka_wanted else kafka_unavailable_reason()
    if reason is not None:
        console.print(f"The streams come from files under {work / 'input'} (no Kafka: {reason})")
        return FileFeed(work), None
    broker = KafkaBroker(work / "kafka").start()
    console.print(f"Kafka broker started on {broker.bootstrap_servers} (pid {broker.pid}, KRaft, data in "
                  f"{broker.data_dir}, {broker.startup_seconds or 0:.1f} s): the streams come through its "
                  "topics")
    return KafkaFeed(broker, work), broker
