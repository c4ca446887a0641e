"""What a batch of Kafka messages with bad ones does (the writer's badRecords policy); never a silent drop.

    fail        (the default) the batch fails and nothing of it is committed (what the write's tasks wrote
                is rolled back: a rollback instant says so), naming the first bad message's topic,
                partition and offset, why it does not decode, and how many there are: BadMessages, bad
                input (exit 2): the writer stops until its producer or policy is fixed
    skip        the good messages are written; the commit records how many were skipped (SKIPPED_KEY) and
                the first of them (FIRST_BAD_KEY: where, and why it does not decode), and the driver's
                log says so (a warning per batch)
    deadLetter  the bad messages go first to a topic (the raw key and value, with headers saying where they
                came from and why: at least once, a batch run again sends them again) or to a Weir table
                keyed by topic, partition and offset (exactly once: a batch run again upserts the same
                rows); then the good ones are written and the commit records the count (DEAD_LETTERED_KEY)

What a batch holds (per partition: the highest offset read, counts, the first bad message) comes from
the write's own tasks (`split`: Arrow, a task's rows; `merged`: every task's summary), or, where a write
cannot carry it (sparkjobs.write.takes_sidecar; a change stream's per-key cut), from one Spark
aggregation over the decoded batch (`summarize`). `judge` is the pure decision.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakecore.errors import InvalidInput
from sparkjobs.kafka.values import ERROR, TOMBSTONE

# what a write's tasks need of each message besides its columns (sparkjobs.write.Sidecar)
SIDE_COLUMNS = ("topic", "partition", "offset", ERROR, TOMBSTONE)

SKIPPED_KEY = "weir.kafka.skipped"
DEAD_LETTERED_KEY = "weir.kafka.dead_lettered"
TOMBSTONES_KEY = "weir.kafka.tombstones"
FIRST_BAD_KEY = "weir.kafka.first_bad"   # topic/partition@offset: why, of the batch's first bad message
Policy = Literal["fail", "skip", "deadLetter"]

log = logging.getLogger(__name__)

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


def split(rows: pa.Table, policy: Policy = "skip") -> tuple[pa.Table, dict[str, Any]]:
    """In a write task: its messages (values.decode's columns + SIDE_COLUMNS) -> (the rows to write: the
    good ones, without SIDE_COLUMNS, or none when a bad one is among them and `policy` fails the batch; the
    task's summary, JSON-able, for `merged`). Vectorized."""
    bad, tombstone = pc.is_valid(rows[ERROR]), rows[TOMBSTONE].fill_null(False)
    per = pa.table({"topic": rows["topic"], "partition": rows["partition"], "offset": rows["offset"],
                    "bad": bad.cast(pa.int64()), "tombstone": tombstone.cast(pa.int64())})
    groups = per.group_by(["topic", "partition"]).aggregate(
        [("offset", "max"), ("offset", "count"), ("bad", "sum"), ("tombstone", "sum")])
    first = None
    if groups["bad_sum"].to_numpy().any():
        wrong = rows.select(["topic", "partition", "offset", ERROR]).filter(bad)
        lowest = wrong.sort_by([("topic", "ascending"), ("partition", "ascending"), ("offset", "ascending")])
        first = lowest.slice(0, 1).to_pylist()[0]
    failed = first is not None and policy == "fail"      # the batch fails: this task writes nothing
    good = rows.slice(0, 0) if failed else rows.filter(pc.invert(pc.or_(bad, tombstone)))
    good = good.drop_columns(list(SIDE_COLUMNS))
    return good, {"read": [[g["topic"], g["partition"], g["offset_max"], g["offset_count"], g["bad_sum"],
                            g["tombstone_sum"]] for g in groups.to_pylist()],
                  "first": None if first is None else [first["topic"], first["partition"], first["offset"],
                                                       first[ERROR]]}


def merged(summaries: list[dict[str, Any]]) -> Summary:
    """Every write task's `split` summary -> the batch's Summary (a partition's messages may be spread
    over several tasks: the write routes by record key)."""
    last: dict[tuple[str, int], int] = {}
    messages = bad = tombstones = 0
    firsts = []
    for summary in summaries:
        for topic, partition, highest, n, b, t in summary["read"]:
            where = (str(topic), int(partition))
            last[where] = max(int(highest), last.get(where, int(highest)))
            messages, bad, tombstones = messages + int(n), bad + int(b), tombstones + int(t)
        if summary["first"] is not None:
            topic, partition, offset, error = summary["first"]
            firsts.append((str(topic), int(partition), int(offset), str(error)))
    return Summary(read=tuple(sorted((t, p, o) for (t, p), o in last.items())), messages=messages, bad=bad,
                   tombstones=tombstones, first_bad=BadMessage(*min(firsts)) if firsts else None)


def judge(summary: Summary, policy: Policy) -> dict[str, str]:
    """The commit metadata the policy adds for this batch, or BadMessages (policy fail, bad ones found)."""
    extra = {TOMBSTONES_KEY: str(summary.tombstones)} if summary.tombstones else {}
    if not summary.bad:
        return extra
    first = summary.first_bad
    assert first is not None
    are = "is" if summary.bad == 1 else "are"
    if policy == "fail":
        raise BadMessages(f"Kafka message {first} does not decode ({first.error}); {summary.bad} of the "
                          f"batch's {summary.messages} messages {are} bad and nothing of the batch was "
                          "committed: fix the producer, or set source.kafka.badRecords.policy to skip or "
                          "deadLetter")
    gone = "skipped" if policy == "skip" else "sent to the dead letter"
    log.warning("%d of the batch's %d Kafka messages %s bad (%s): the first, %s, does not decode (%s)",
                summary.bad, summary.messages, are, gone, first, first.error)
    return {**extra, (SKIPPED_KEY if policy == "skip" else DEAD_LETTERED_KEY): str(summary.bad),
            FIRST_BAD_KEY: f"{first}: {first.error}"}


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
