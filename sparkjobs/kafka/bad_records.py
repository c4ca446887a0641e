"""What a batch of Kafka messages with bad ones does (the writer's badRecords policy); never a silent drop.

    fail        (the default) the batch fails before anything is written, naming the first bad message's
                topic, partition and offset, why it does not decode, and how many there are: BadMessages,
                bad input (exit 2): the writer stops until its producer or policy is fixed
    skip        the good messages are written; the commit records how many were skipped (SKIPPED_KEY)
    deadLetter  the bad messages go first to a topic (the raw key and value, with headers saying where they
                came from and why: at least once, a batch run again sends them again) or to a Weir table
                keyed by topic, partition and offset (exactly once: a batch run again upserts the same
                rows); then the good ones are written and the commit records the count (DEAD_LETTERED_KEY)

`summarize` reads what a batch holds in one Spark aggregation (per partition: the highest offset read,
counts, the first bad message); `judge` is the pure decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakecore.errors import InvalidInput
from sparkjobs.kafka.values import ERROR, TOMBSTONE

SKIPPED_KEY = "weir.kafka.skipped"
DEAD_LETTERED_KEY = "weir.kafka.dead_lettered"
TOMBSTONES_KEY = "weir.kafka.tombstones"
Policy = Literal["fail", "skip", "deadLetter"]

# a dead-letter table: one row per bad message, keyed by where it was (a batch run again upserts them)
DEAD_LETTER_SCHEMA = pa.schema([
    pa.field("topic", pa.string(), nullable=False), pa.field("partition", pa.int32(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False), pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("error", pa.string()), pa.field("writer", pa.string()),
    pa.field("dead_lettered_at", pa.timestamp("us", tz="UTC"))])
DEAD_LETTER_KEY = ("topic", "partition", "offset")


class BadMessages(InvalidInput):
    """A batch holds messages that do not decode and the policy is fail."""


@dataclass(frozen=True)
class BadMessage:
    topic: str
    partition: int
    offset: int
    error: str

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}@{self.offset}"


@dataclass(frozen=True)
class Summary:
    """What one batch of messages holds."""

    read: tuple[tuple[str, int, int], ...]   # (topic, partition, highest offset read) per partition read
    messages: int
    bad: int
    tombstones: int
    first_bad: BadMessage | None             # the lowest (topic, partition, offset) of the bad ones


def summarize(decoded: DataFrame) -> Summary:
    """One aggregation over the decoded batch (values.decode's rows)."""
    bad = F.col(ERROR).isNotNull()
    rows = decoded.groupBy("topic", "partition").agg(
        F.max("offset").alias("last"), F.count(F.lit(1)).alias("n"),
        F.sum(F.when(bad, 1).otherwise(0)).alias("bad"),
        F.sum(F.when(F.col(TOMBSTONE), 1).otherwise(0)).alias("tombstones"),
        F.min(F.when(bad, F.struct(F.col("offset"), F.col(ERROR)))).alias("first")).collect()
    firsts = sorted((r["topic"], r["partition"], r["first"]["offset"], r["first"][ERROR])
                    for r in rows if r["first"] is not None)
    return Summary(read=tuple(sorted((r["topic"], int(r["partition"]), int(r["last"])) for r in rows)),
                   messages=sum(int(r["n"]) for r in rows), bad=sum(int(r["bad"]) for r in rows),
                   tombstones=sum(int(r["tombstones"]) for r in rows),
                   first_bad=BadMessage(*firsts[0]) if firsts else None)


def judge(summary: Summary, policy: Policy) -> dict[str, str]:
    """The commit metadata the policy adds for this batch, or BadMessages (policy fail, bad ones found)."""
    extra = {TOMBSTONES_KEY: str(summary.tombstones)} if summary.tombstones else {}
    if not summary.bad:
        return extra
    first = summary.first_bad
    assert first is not None
    if policy == "fail":
        raise BadMessages(f"Kafka message {first} does not decode ({first.error}); {summary.bad} of the "
                          f"batch's {summary.messages} messages are bad and nothing of the batch was "
                          "written: fix the producer, or set source.kafka.badRecords.policy to skip or "
                          "deadLetter")
    return {**extra, (SKIPPED_KEY if policy == "skip" else DEAD_LETTERED_KEY): str(summary.bad)}


def dead_letter_rows(decoded: DataFrame, writer: str) -> DataFrame:
    """The bad messages as rows of DEAD_LETTER_SCHEMA."""
    return decoded.where(F.col(ERROR).isNotNull()).select(
        "topic", F.col("partition").cast("int").alias("partition"), "offset", "key", "value",
        F.col(ERROR).alias("error"), F.lit(writer).alias("writer"),
        F.current_timestamp().alias("dead_lettered_at"))


def send_to_topic(rows: DataFrame, bootstrap: str, topic: str, options: dict[str, str]) -> None:
    """The bad messages to a dead-letter topic: raw key and value, headers weir.source
    (topic/partition@offset) and weir.error."""
    where = F.concat_ws("", F.col("topic"), F.lit("/"), F.col("partition").cast("string"), F.lit("@"),
                        F.col("offset").cast("string"))
    headers = F.array(
        F.struct(F.lit("weir.source").alias("key"), where.cast("binary").alias("value")),
        F.struct(F.lit("weir.error").alias("key"), F.col("error").cast("binary").alias("value")))
    out = rows.select("key", "value", headers.alias("headers"))
    writer: Any = out.write.format("kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topic)
    for key, value in options.items():
        writer = writer.option(f"kafka.{key}", value)
    writer.save()
