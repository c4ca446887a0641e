"""The Kafka side of the writer jobs (stream_write, batch_write): where the query starts, how its
micro-batches are prepared, and the one-instant batch write. Thin: source.py reads, batch.py prepares."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakecore import Table
from sparkjobs.contract import WriterArgs
from sparkjobs.kafka import offsets, source
from sparkjobs.kafka.batch import KafkaBatches
from sparkjobs.stream import WRITER_KEY, checkpoint_is_fresh, last_commit_extra

log = logging.getLogger(__name__)
RESTARTS = 3   # how often a job starts again at once on a topic recreated while it read it (skip)


@dataclass(frozen=True)
class KafkaStream:
    df: Any                      # the streaming DataFrame of Kafka rows
    prepare: KafkaBatches
    fresh_checkpoint: bool       # no Spark checkpoint: the query starts where the table says
    unrecorded: offsets.Offsets = field(default_factory=dict)   # source.Start.unrecorded


def begin(spark: Any, table: Table, args: WriterArgs, writer: str,
          recreated: Mapping[str, tuple[str, str]] | None = None,
          resumed: offsets.Offsets | None = None, *, streaming: bool = False) -> source.Start:
    """Where the writer goes on: source.start from the offsets (and the topics' ids) its newest commit
    recorded (`recreated`: topics the job saw created again while it read them, read from their start;
    `resumed`: where its previous query started partitions without a recorded offset)."""
    extra = last_commit_extra(table, writer, offsets.OFFSETS_KEY) or {}
    return source.start(spark, args, offsets.decode(extra.get(offsets.OFFSETS_KEY)),
                        offsets.decode_ids(extra.get(offsets.TOPIC_IDS_KEY)), recreated, resumed,
                        resolve_latest=streaming)


def stream(spark: Any, table: Table, args: WriterArgs, columns: list[str], writer: str, checkpoint: str,
           storage_options: Any = None,
           recreated: Mapping[str, tuple[str, str]] | None = None,
           resumed: offsets.Offsets | None = None) -> KafkaStream:
    start = begin(spark, table, args, writer, recreated, resumed,   # unreachable brokers fail here
                  streaming=True)
    fresh = checkpoint_is_fresh(spark, checkpoint)
    if (start.lost or start.recreated) and not fresh:   # its offsets are gone: start where the table says
        moved = set_aside(spark, checkpoint)
        log.warning("the Spark checkpoint %s names offsets Kafka no longer holds: moved to %s (kept, not "
                    "read); the query starts at the offsets above", checkpoint, moved)
        fresh = True
    df = source.read(spark, args, start.starting if fresh else args.kafka_starting_offsets, streaming=True)
    return KafkaStream(df, KafkaBatches(table, args, columns, writer, start.recorded, storage_options,
                                        lost=start.lost, topic_ids=start.topic_ids), fresh, start.unrecorded)


def set_aside(spark: Any, checkpoint: str) -> str:
    """Rename the Spark checkpoint to `<checkpoint>.lost-<epoch ms>` (through Spark's file systems); the
    new name."""
    jvm = spark._jvm
    path = jvm.org.apache.hadoop.fs.Path(checkpoint.rstrip("/"))
    moved = f"{checkpoint.rstrip('/')}.lost-{time.time_ns() // 1_000_000}"
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.rename(path, jvm.org.apache.hadoop.fs.Path(moved)):
        raise RuntimeError(f"could not move the Spark checkpoint {checkpoint} aside to {moved}; move or "
                           "delete it, then start the writer again")
    return moved


def batch_write(spark: Any, table: Table, args: WriterArgs, columns: list[str], writer: str,
                options: Any, storage_options: Any = None) -> Any:
    """A batch writer's Kafka source: what the topics hold after the offsets this writer's last commit
    recorded (else from --kafka-starting-offsets) up to now, as one instant that records the new offsets.
    Run again, it goes on from there. A topic deleted and created again while it was read
    (source.TopicRecreated, onDataLoss: skip) rolls the write back, and it starts again from the table's
    offsets (at most RESTARTS times)."""
    from sparkjobs.write import write_dataframe

    recreated: dict[str, tuple[str, str]] = {}
    for attempt in range(RESTARTS + 1):   # a batch read never takes `latest` as offsets: nothing to resume
        start = begin(spark, table, args, writer, recreated)
        df = source.read(spark, args, start.starting, streaming=False)
        batches = KafkaBatches(table, args, columns, writer, start.recorded, storage_options,
                               lost=start.lost, topic_ids=start.topic_ids)
        try:
            prepared = batches(df)
            try:
                extra = {**args.extra, **prepared.extra, WRITER_KEY: writer}
                return write_dataframe(prepared.df, table, args.operation,  # type: ignore[arg-type]
                                       options=options, extra=extra, sidecar=prepared.sidecar,
                                       before_commit=prepared.before_commit)
            finally:
                prepared.release()
        except source.TopicRecreated as exc:
            if attempt == RESTARTS:
                raise
            log.warning("%s; starting again", exc)
            recreated |= exc.topics
        except Exception as exc:
            lost = source.data_lost(exc)
            if lost is not None:   # offsets no longer in the topic: bad input, not retried
                raise lost from None
            raise
        finally:
            batches.close()
    raise AssertionError("unreachable")
