"""Kafka -> Weir vs Kafka -> plain Parquet with Spark, on a real broker, in one run.

    python bench/kafka_bench.py [--messages N] [--samples N] [--trigger S] [--quick]

A single-node KRaft broker of the run's own (lakeoperator.dev.kafka; `make kafka`) gets one topic of
`--messages` JSON messages (default 1M; 4 partitions; keys 0..N-1, each message
{"id", "ts", "name", "amount", "tag"}). Then, in one local Spark session (every core, the pinned
connectors of `make spark-jars`), each repeated --reps times, alternating:

  floor:  spark.read.format("kafka") of the whole topic, from_json with the table's schema, written with
          df.write.parquet (Spark's own writer, zstd): what any Spark job pays to land the topic
  weir:   the batch Kafka writer (sparkjobs.kafka.jobs.batch_write: the same connector and decoding, bad
          records checked, offsets recorded in the commit) upserting the topic into a new merge-on-read
          table (4 buckets)

Both paths run once untimed on a small topic first (the session's JIT, Python workers, codegen), and
alternate which goes first. ratio = weir / floor (median seconds; target <= 1.3).

Latency: a streaming Kafka writer (the job's own run(), trigger every --trigger s) on a small table; a
message is produced every 1.3 s with a fresh key; the time from its send until Table.read() shows the key
is one sample (polled every 0.1 s). Target: p50 <= trigger + 2 s. Prints one JSON document; `--quick` is
the smoke run (5k messages, 1 rep, no warm-up, 3 samples at a 1 s trigger): every figure, none worth
judging.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "operator"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyarrow as pa
from common import median, timed

from lakecore import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("name", pa.string()),
                    ("amount", pa.float64()), ("tag", pa.string())])
PARTITIONS = 4
CODEC = "zstd"


def messages(n: int) -> Any:
    for i in range(n):
        yield str(i), json.dumps({"id": i, "ts": 1, "name": f"name-{i % 9973}", "amount": i * 0.25,
                                  "tag": ("a", "b", "c", "d")[i % 4]})


def new_table(root: Path, name: str) -> Table:
    return Table.create(str(root / name), schema=SCHEMA, record_key=["id"], ordering_field="ts",
                        table_type="merge_on_read", buckets=4)


def land_floor(spark: Any, args: Any, out: str) -> None:
    """Spark alone: the topic through the same connector, from_json with the table's schema, to Parquet."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from sparkjobs.kafka import source

    df = source.read(spark, args, "earliest", streaming=False)
    df.select(F.from_json(F.col("value").cast("string"), from_arrow_schema(SCHEMA)).alias("v")) \
        .select("v.*").write.parquet(out)


def land_weir(spark: Any, args: Any, root: Path, name: str) -> None:
    """The batch Kafka writer, upserting the topic into a new merge-on-read table."""
    from sparkjobs.batch_write import writer_options
    from sparkjobs.kafka import jobs

    table = new_table(root, name)
    jobs.batch_write(spark, table, args, list(SCHEMA.names), "bench",
                     writer_options(args, "bench", spark, table.storage))


def throughput(spark: Any, bootstrap: str, topic: str, root: Path, reps: int) -> dict[str, Any]:
    from sparkjobs.contract import BatchWriteArgs

    times: dict[str, list[float]] = {"floor": [], "weir": []}
    rows: dict[str, int] = {}
    for rep in range(reps):
        args = BatchWriteArgs(table=str(root / f"weir-{rep}"), kafka_bootstrap_servers=bootstrap,
                              kafka_topics=(topic,))
        runs = {"floor": lambda a=args, r=rep: land_floor(spark, a, str(root / f"floor-{r}")),
                "weir": lambda a=args, r=rep: land_weir(spark, a, root, f"weir-{r}")}
        for name in (("floor", "weir") if rep % 2 == 0 else ("weir", "floor")):   # alternating first
            times[name].append(timed(runs[name])[0])
        rows = {"floor": spark.read.parquet(str(root / f"floor-{rep}")).count(),
                "weir": Table.open(str(root / f"weir-{rep}")).read(columns=["id"]).num_rows}
    floor_s, weir_s = median(times["floor"]), median(times["weir"])
    return {"floor_s": round(floor_s, 2), "weir_s": round(weir_s, 2), "ratio": round(weir_s / floor_s, 2),
            "times": {k: [round(t, 2) for t in v] for k, v in times.items()}, "rows": rows,
            "messages_per_s": round(rows["weir"] / weir_s)}


def latency(spark: Any, bootstrap: str, root: Path, samples: int, trigger: float) -> dict[str, Any]:
    from lakeoperator.dev.kafka_client import create_topic, produce
    from sparkjobs.contract import StreamWriteArgs
    from sparkjobs.stream_write import run

    topic = "latency"
    create_topic(bootstrap, topic, partitions=1)
    table = new_table(root, "latency")
    args = StreamWriteArgs(table=table.uri, kafka_bootstrap_servers=bootstrap, kafka_topics=(topic,),
                           writer_id="latency", checkpoint=str(root / "latency-checkpoint"),
                           trigger_seconds=trigger)
    failed: list[BaseException] = []

    def job() -> None:
        try:
            run(args)
        except BaseException as exc:   # reported below
            failed.append(exc)

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    waited: list[float] = []
    try:
        deadline = time.monotonic() + 120
        while not spark.streams.active and time.monotonic() < deadline:   # the query is up
            time.sleep(0.2)
        produce(bootstrap, topic, [("-1", json.dumps({"id": -1, "ts": 1, "name": "warm-up", "amount": 0.0,
                                                      "tag": "w"}))])
        visible(table.uri, -1, 120)   # the first micro-batch (Python workers start) is not a sample
        for key in range(samples):
            time.sleep(1.3)   # not in step with the trigger
            sent = time.monotonic()
            produce(bootstrap, topic, [(str(key), json.dumps({"id": key, "ts": 1, "name": "x", "amount": 1.0,
                                                              "tag": "l"}))])
            waited.append(visible(table.uri, key, 60) - sent)
    finally:
        for query in spark.streams.active:
            query.stop()
        thread.join(timeout=60)
    if failed:
        raise failed[0]
    ordered = sorted(waited)
    return {"trigger_s": trigger, "samples": len(waited), "p50_s": round(median(waited), 2),
            "max_s": round(ordered[-1], 2), "target_p50_s": trigger + 2,
            "pass": median(waited) <= trigger + 2}


def visible(uri: str, key: int, timeout_s: float) -> float:
    """When Table.read() first shows `key` (monotonic seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if key in Table.open(uri).read(columns=["id"]).column("id").to_pylist():
                return time.monotonic()
        except Exception:   # no commit yet
            pass
        time.sleep(0.1)
    raise TimeoutError(f"key {key} not visible after {timeout_s} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--trigger", type=float, default=2.0)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.messages, a.reps, a.samples, a.trigger = 5_000, 1, 3, 1.0
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from lakeoperator.dev.kafka import KafkaBroker
    from lakeoperator.dev.kafka_client import create_topic, produce
    from sparkjobs.session import local_session

    work = Path(tempfile.mkdtemp(prefix="weir-kafka-bench-"))
    broker = KafkaBroker(work / "kafka", heap="1g").start()
    try:
        topic = "bench"
        create_topic(broker.bootstrap_servers, topic, partitions=PARTITIONS)
        produce_s, _ = timed(lambda: produce(broker.bootstrap_servers, topic, messages(a.messages)))
        spark = local_session("weir-kafka-bench", cores=os.cpu_count() or 2, work_dir=str(work / "spark"))
        spark.sparkContext.setLogLevel("ERROR")
        spark.conf.set("spark.sql.parquet.compression.codec", CODEC)
        out: dict[str, Any] = {"messages": a.messages, "partitions": PARTITIONS, "cores": os.cpu_count(),
                               "produce_s": round(produce_s, 2),
                               "load_average": [round(x, 2) for x in os.getloadavg()]}
        if not a.quick:   # warm-up, untimed: the first query of a session pays for the JIT, workers, codegen
            create_topic(broker.bootstrap_servers, "warm-up", partitions=PARTITIONS)
            produce(broker.bootstrap_servers, "warm-up", messages(2_000))
            throughput(spark, broker.bootstrap_servers, "warm-up", work / "warm-up", 1)
        out["throughput"] = throughput(spark, broker.bootstrap_servers, topic, work, a.reps)
        out["throughput"]["target_ratio"] = 1.3
        out["throughput"]["pass"] = out["throughput"]["ratio"] <= 1.3
        out["latency"] = latency(spark, broker.bootstrap_servers, work, a.samples, a.trigger)
        out["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
