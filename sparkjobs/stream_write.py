"""Entry point: a streaming writer (the operator's streaming LakeWriter).

    spark-submit sparkjobs/stream_write.py --table URI --source DIR --writer-id W --checkpoint DIR ...
    python -m sparkjobs.stream_write ...         (a local Spark with every core: the embedded default)

Runs until stopped (or, with --available-now, until what is there now is written). File sources are
read with the table's schema — with --column-group, with the key, partition fields and that group's
columns only, so the other groups are left as they are. A Kafka source (--kafka-bootstrap-servers)
decodes its messages into the same columns (sparkjobs.kafka) and records its offsets in each commit.
Prints one JSON line when it ends; exit codes as sparkjobs.contract.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from sparkjobs.contract import StreamWriteArgs
from sparkjobs.entry import open_table, run_job, storage_options

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


def run(args: StreamWriteArgs) -> dict[str, Any]:
    import pyarrow as pa

    from sparkjobs.entry import owned_columns
    from sparkjobs.session import job_session

    table = open_table(args.table, args.zookeeper, args)
    spark = job_session(args.app_name)
    schema = table.config.schema
    columns = owned_columns(table.config, args.column_group)
    if columns is not None:
        schema = pa.schema([schema.field(name) for name in columns])
    if not args.kafka_bootstrap_servers:
        return _run_query(spark, table, args, schema)
    from sparkjobs.kafka.jobs import RESTARTS
    from sparkjobs.kafka.source import TopicRecreated

    recreated: dict[str, tuple[str, str]] = {}
    resumed: dict[str, dict[int, int]] = {}   # where the query before started unrecorded partitions
    for attempt in range(RESTARTS + 1):
        try:
            return _run_query(spark, table, args, schema, recreated, resumed)
        except TopicRecreated as exc:   # rolled back: the next query reads the new topic from its start
            if attempt == RESTARTS:   # the next process is not told: its stale checkpoint must not be used
                from sparkjobs.kafka.jobs import set_aside
                from sparkjobs.stream import checkpoint_is_fresh

                if not checkpoint_is_fresh(spark, args.checkpoint):
                    log.warning("the Spark checkpoint %s names offsets of a topic created again: moved to %s",
                                args.checkpoint, set_aside(spark, args.checkpoint))
                raise
            log.warning("%s; starting again", exc)
            recreated |= exc.topics
    raise AssertionError("unreachable")


def _run_query(spark: Any, table: Any, args: StreamWriteArgs, schema: pa.Schema,
               recreated: dict[str, tuple[str, str]] | None = None,
               resumed: dict[str, dict[int, int]] | None = None) -> dict[str, Any]:
    """One streaming query of the job, until it ends (stopped, drained with --available-now, or failed).
    A Kafka query's start of partitions without a recorded offset goes into `resumed` (for a restart)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from sparkjobs.batch_write import table_zookeeper, writer_options
    from sparkjobs.file_source import options_for, told_as_bad_input, unknown_json_fields, unreadable
    from sparkjobs.stream import BatchWriter, Prepare, write_stream

    kafka = None
    prepare: Prepare | None   # what a micro-batch goes through before its write
    if args.kafka_bootstrap_servers:
        from sparkjobs.kafka import jobs

        kafka = jobs.stream(spark, table, args, list(schema.names), args.writer_id, args.checkpoint,
                            storage_options(args), recreated, dict(resumed or {}))
        if resumed is not None:
            resumed.clear()
            resumed.update(kafka.unrecorded)
        df = kafka.df
        prepare = kafka.prepare
    else:
        options = options_for(args.source_format, args.source_options)
        reader = spark.readStream.format(args.source_format).options(**options) \
            .schema(from_arrow_schema(schema))
        if args.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", str(args.max_files_per_trigger))
        with told_as_bad_input(args.source):
            df = reader.load(args.source)
        prepare = unknown_json_fields(spark, args.source_format, options, list(table.config.schema.names),
                                      args.checkpoint)
    trigger: dict[str, Any] | None = None
    if args.available_now:
        trigger = {"availableNow": True}
    elif args.trigger_seconds:
        trigger = {"processingTime": f"{args.trigger_seconds} seconds"}
    seen: list[BatchWriter] = []
    query = write_stream(df, table, writer_id=args.writer_id,
                         checkpoint=args.checkpoint, operation=args.operation,  # type: ignore[arg-type]
                         options=writer_options(args, args.writer_id, spark, table.storage,
                                                table_zookeeper(table)),
                         trigger=trigger,
                         on_batch=seen.append,
                         prepare=prepare,
                         fresh_checkpoint=kafka.fresh_checkpoint if kafka else False)
    failure: BaseException | None
    try:
        query.awaitTermination()
        failure = query.exception()
    except Exception as exc:  # the query failed: a micro-batch aborted from outside ends it as a conflict
        failure = exc
    finally:
        if kafka is not None:
            kafka.prepare.close()
    writer = seen[-1] if seen else None
    if failure is not None:
        if writer is not None and writer.aborted is not None:
            raise writer.aborted from None
        if writer is not None and writer.failure is not None:  # e.g. bad input: its own class and message
            raise writer.failure from None
        if kafka is not None:   # the brokers went away mid-run: SourceUnavailable (retried, no budget spent)
            from sparkjobs.kafka.source import data_lost, partitions

            lost = data_lost(failure)
            if lost is not None:   # offsets no longer in the topic: bad input, not retried
                raise lost from None
            partitions(spark, args)
        told = unreadable(failure, args.source)
        if told is not None:   # a file the stream cannot read as the table's: its writer's input is bad
            from lakecore.errors import InvalidInput

            raise InvalidInput(told) from None
        raise RuntimeError(str(failure))
    return {"writer_id": args.writer_id, "last_batch": writer.committed if writer else None,
            "instants": [i.requested_time for i in writer.instants] if writer else [],
            "skipped_batches": writer.skipped if writer else []}


def main(argv: list[str] | None = None) -> int:
    from lakecore.errors import InvalidInput, InvalidTableConfig, TableNotFound, WriteConflict
    from sparkjobs.batch_write import describe_conflict
    from sparkjobs.kafka.source import SourceUnavailable

    return run_job(lambda: StreamWriteArgs.from_argv(sys.argv[1:] if argv is None else argv), run,
                   done="stopped", bad_input=(InvalidInput, InvalidTableConfig, TableNotFound),
                   conflict=(WriteConflict,), describe_conflict=describe_conflict,
                   unavailable=(SourceUnavailable,))


if __name__ == "__main__":
    sys.exit(main())
