"""One micro-batch (or one batch write) of Kafka messages -> what one instant writes, exactly once.

    (a schema registry: the batch's schema ids, their writer schemas fetched once per job: registry.py) ->
    decode (values.py) -> the write, in one pass: each write task writes the good messages of its file
    groups and summarizes all of its messages (per partition the highest offset read, the bad ones:
    bad_records.split) -> between the tasks' writes and the commit, the policy (bad_records.py: fail rolls
    the write back, skip, dead-letter them first: the bad ones decoded again from the batch) -> the commit,
    with the offsets the table now holds (`weir.kafka.offsets`), once Kafka confirmed that the topics are
    still the ones the writer started reading (their ids: source.check_same_topics)

A change stream (Debezium) is cut to the latest event per key first (source timestamp, then offset: a
window over the batch), and a write that cannot carry the summary (sparkjobs.write.takes_sidecar) neither:
those persist the decoded batch, summarize it in one aggregation and write its good rows (two passes).

The offsets and the rows land in one instant, so the table always says where its writer is: a query that
lost its Spark checkpoint starts at those offsets (source.start), and a micro-batch Spark runs
again after a crash between our commit and its checkpoint is skipped by its batch id (stream.BatchWriter).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakecore import Table
from lakecore.config import OP, TableConfig
from lakecore.write import check_operation
from sparkjobs.contract import WriterArgs
from sparkjobs.kafka import bad_records, offsets, registry
from sparkjobs.kafka.source import TopicIds, check_same_topics, consumer_properties
from sparkjobs.kafka.values import ERROR, TOMBSTONE, decode
from sparkjobs.stream import Prepared
from sparkjobs.write import Sidecar, takes_sidecar

# Spark's Kafka rows carry these; a change stream orders a key's events by them
_ORDER = ("offset",)


class KafkaBatches:
    """The `prepare` of a Kafka writer's micro-batches (stream.BatchWriter), or of its one batch write."""

    def __init__(self, table: Table, args: WriterArgs, columns: list[str], writer: str,
                 recorded: offsets.Offsets | None, storage_options: Any = None,
                 lost: offsets.Lost | None = None, topic_ids: dict[str, str] | None = None) -> None:
        self.table, self.args, self.columns, self.writer = table, args, columns, writer
        self.operation = check_operation(args.operation)
        self.storage_options = storage_options   # the job's (by reference), for a dead-letter table
        self.offsets = recorded        # where the table says the writer is (advanced at each commit)
        self.lost = lost or {}         # what Kafka no longer held at the start: the next commit records it
        self.topic_ids = topic_ids or {}   # the topics' ids at the start: every commit records them
        self.registry = registry.SchemaRegistry(args.schema_registry_url, args.schema_registry_auth_env) \
            if args.schema_registry_url else None
        self._admin: TopicIds | None = None   # asks the topics' ids before each commit (close() ends it)

    def close(self) -> None:
        """Let go of the brokers' admin client (the job's query or batch write ended)."""
        if self._admin is not None:
            self._admin.close()

    def __call__(self, batch: DataFrame, batch_id: int | None = None) -> Prepared:
        config = self.table.config
        schemas = self.registry.schemas(registry.batch_schema_ids(batch)) if self.registry else None
        decoded = decode(batch, config, self.columns, self.args.value_format, self.args.avro_schema, schemas)
        changes = self.args.value_format == "debezium"
        if self._admin is None:
            self._admin = TopicIds(batch.sparkSession, self.args)
        same_topics = partial(check_same_topics, self._admin, self.topic_ids)
        if not changes and takes_sidecar(config, self.operation):
            return self._one_pass(decoded, same_topics)
        decoded = raw_of_bad_only(decoded).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            summary = bad_records.summarize(decoded)
            extra = bad_records.judge(summary, self.args.bad_records)  # type: ignore[arg-type]
            if summary.bad and self.args.bad_records == "deadLetter":
                same_topics()   # never dead-letter what a recreated topic's wrong offsets gave
                self._dead_letter(decoded)
        except BaseException:
            decoded.unpersist()
            raise
        now = offsets.advanced(self.offsets, summary.read)
        extra[offsets.OFFSETS_KEY] = offsets.encode(now)
        extra.update(self._lost())

        def committed() -> None:
            self.offsets, self.lost = now, {}

        def release() -> None:
            decoded.unpersist()

        return Prepared(good_rows(decoded, config, self.columns, changes), extra, committed, release,
                        before_commit=same_topics)

    def _one_pass(self, decoded: DataFrame, same_topics: Callable[[], None]) -> Prepared:
        """The write's own tasks summarize the batch (bad_records.split); the policy is decided before
        its commit (a dead letter reads the bad messages again: `decoded` is not held)."""
        now: list[offsets.Offsets] = []

        def decide(summaries: list[Any]) -> dict[str, str]:
            summary = bad_records.merged(summaries)
            extra = bad_records.judge(summary, self.args.bad_records)  # type: ignore[arg-type]
            if summary.bad and self.args.bad_records == "deadLetter":
                same_topics()   # never dead-letter what a recreated topic's wrong offsets gave
                self._dead_letter(decoded)
            now[:] = [offsets.advanced(self.offsets, summary.read)]
            return {**extra, offsets.OFFSETS_KEY: offsets.encode(now[0]), **self._lost()}

        def committed() -> None:
            self.offsets, self.lost = now[0], {}

        rows = decoded.select(*self.columns, *bad_records.SIDE_COLUMNS)
        return Prepared(rows, {}, committed,
                        sidecar=Sidecar(bad_records.SIDE_COLUMNS,
                                        partial(bad_records.split, policy=self.args.bad_records),  # type: ignore[arg-type]
                                        decide), before_commit=same_topics)

    def _lost(self) -> dict[str, str]:
        """What a commit records beside its offsets: the topics' ids, and what Kafka no longer held."""
        ids = {offsets.TOPIC_IDS_KEY: offsets.encode_ids(self.topic_ids)} if self.topic_ids else {}
        return {**ids, **({offsets.LOST_KEY: offsets.encode_lost(self.lost)} if self.lost else {})}

    def _dead_letter(self, decoded: DataFrame) -> None:
        rows = bad_records.dead_letter_rows(decoded, self.writer)
        if self.args.dead_letter_topic:
            bad_records.send_to_topic(rows, str(self.args.kafka_bootstrap_servers),
                                      self.args.dead_letter_topic, consumer_properties(self.args))
            return
        from sparkjobs.write import write_dataframe

        write_dataframe(rows, dead_letter_table(str(self.args.dead_letter_table), self.storage_options),
                        "upsert")


def raw_of_bad_only(decoded: DataFrame) -> DataFrame:
    """The decoded rows with each message's raw key and value kept only where it is bad (what a dead letter
    carries): a good message's bytes are in its columns already, and the batch is held in memory once."""
    bad = F.col(ERROR).isNotNull()
    return decoded.withColumns({"key": F.when(bad, F.col("key")), "value": F.when(bad, F.col("value"))})


def good_rows(decoded: DataFrame, config: TableConfig, columns: list[str], changes: bool) -> DataFrame:
    """The rows to write: the messages that decoded, the writer's columns (+ each row's op for a change
    stream, whose events per key are cut to the latest: source timestamp, then offset)."""
    good = decoded.where(F.col(ERROR).isNull() & ~F.col(TOMBSTONE))
    if not changes:
        return good.select(*columns)
    order = [F.col(config.ordering_fields[0]).desc(), *[F.col(c).desc() for c in _ORDER]]
    latest = Window.partitionBy(*config.record_key).orderBy(*order)
    return good.withColumn("_weir_rank", F.row_number().over(latest)).where(F.col("_weir_rank") == 1) \
        .select(*columns, OP)


def dead_letter_table(uri: str, storage: Any) -> Table:
    """The dead-letter table at `uri` (made with bad_records.DEAD_LETTER_SCHEMA, on the writer's storage
    options, when it does not exist yet)."""
    from lakecore.errors import TableNotFound

    try:
        return Table.open(uri, storage_options=storage)
    except TableNotFound:
        return Table.create(uri, schema=bad_records.DEAD_LETTER_SCHEMA,
                            record_key=list(bad_records.DEAD_LETTER_KEY), ordering_field="dead_lettered_at",
                            buckets=1,
                            storage_options=storage)
