"""Entry point: write one input into a table as one instant.

    spark-submit sparkjobs/batch_write.py --table URI --source PATH [--source-format parquet] ...
    python -m sparkjobs.batch_write ...         (a local Spark with every core: the embedded default)

Prints one JSON line: the result (instant, records, file groups) or the error with its report; the
exit code says what kind of outcome it was (sparkjobs.contract.EXIT_*), for the operator.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from sparkjobs.contract import WRITER_ENV, BatchWriteArgs, WriterArgs
from sparkjobs.entry import open_table, owned_columns, run_job, storage_options


def writer_options(args: WriterArgs, writer_name: str | None = None, spark: Any = None,
                   storage: Any = None, abort_zookeeper: str | None = None) -> Any:
    """Early detection and file size from the arguments; with a ZooKeeper connect string the writer
    also registers there (an ephemeral node per write: the liveness the operator watches), else on the
    table's `storage` (.weir/writers/<instant>), so a supervisor can tell whose write an instant is; it
    watches its abort flag on that ZooKeeper (else on `abort_zookeeper`: the table's recorded ZooKeeper
    lock). The registered writer is the operator's LakeWriter (WEIR_WRITER, "namespace/name") when the
    operator launched the job, else `writer_name`. A marker
    service listens and is advertised where the arguments say, else where the Spark driver is
    (`spark`'s conf), so executors on other hosts reach it."""
    from lakecore import (
        AbortWatchOptions,
        ConflictOptions,
        FileOptions,
        MarkerOptions,
        RegistrationOptions,
        WriterOptions,
    )
    from lakecore.concurrency.conflicts.early import EarlyDetection
    from lakecore.concurrency.liveness.writers import StorageWriterRegistry, ZooKeeperWriterRegistry

    detection = None
    if args.early_detection:  # the contract checked the strategy's name
        detection = EarlyDetection(args.early_detection, zookeeper=args.zookeeper)  # type: ignore[arg-type]
    registry: Any = None
    if args.zookeeper:
        registry = ZooKeeperWriterRegistry(args.zookeeper)
    elif storage is not None:
        registry = StorageWriterRegistry(storage)
    writer_name = os.environ.get(WRITER_ENV) or writer_name
    bind, advertise = args.marker_bind_host, args.marker_host
    if spark is not None:
        from sparkjobs.session import driver_endpoint

        driver_bind, driver_host = driver_endpoint(spark)
        bind, advertise = bind or driver_bind, advertise or driver_host
    from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig

    heartbeat = HeartbeatConfig(args.heartbeat_interval_s or HeartbeatConfig.interval_s,
                                args.heartbeat_misses or HeartbeatConfig.tolerable_misses)
    return WriterOptions(heartbeat=heartbeat, files=FileOptions(max_rows_per_file=args.max_rows_per_file),
                         conflicts=ConflictOptions(early_detection=detection),
                         markers=MarkerOptions(bind_host=bind or "127.0.0.1", advertise_host=advertise),
                         registration=RegistrationOptions(registry, writer_name),
                         abort_watch=AbortWatchOptions(zookeeper=args.zookeeper or abort_zookeeper))


def table_zookeeper(table: Any) -> str | None:
    """The ZooKeeper ensemble of the table's recorded lock, if it is on ZooKeeper."""
    spec = table.config.lock
    return spec.connect if spec.provider == "zookeeper" else None


def run(args: BatchWriteArgs) -> dict[str, Any]:
    from sparkjobs.file_source import read_batch, told_as_bad_input
    from sparkjobs.session import job_session
    from sparkjobs.write import write_dataframe

    table = open_table(args.table, args.zookeeper, args)
    spark = job_session(args.app_name)
    columns = owned_columns(table.config, args.column_group)
    options = writer_options(args, args.app_name, spark, table.storage, table_zookeeper(table))
    if args.kafka_bootstrap_servers:   # from where this writer's last commit left off, up to now
        from sparkjobs.kafka import jobs

        writer = args.extra.get("writer") or args.app_name
        result = jobs.batch_write(spark, table, args, columns or list(table.config.schema.names), writer,
                                  options, storage_options(args))
        return _outcome(result)
    with told_as_bad_input(args.source):
        df = read_batch(spark, args.source_format, args.source, args.source_options, table.config.schema)
        if columns is not None:  # a column group's writer writes its group only, whatever else the input has
            df = df.select(*group_columns(df.columns, columns, args.column_group))
        result = write_dataframe(df, table, args.operation, options=options,  # type: ignore[arg-type]
                                 extra=args.extra)
    return _outcome(result)


def group_columns(have: list[str], columns: list[str], group: str | None) -> list[str]:
    """The input's columns a column group's writer writes; MissingColumn naming those it lacks."""
    missing = [c for c in columns if c not in have]
    if missing:
        from lakecore.config import did_you_mean
        from lakecore.errors import MissingColumn

        others = [c for c in have if c not in columns]
        raise MissingColumn(f"the input of column group {group!r} lacks {', '.join(missing)}"
                            f"{did_you_mean(missing, others)}; the input has {', '.join(have)}: add them to "
                            "the input")
    return columns


def _outcome(result: Any) -> dict[str, Any]:
    return {"instant": result.instant.requested_time, "completion_time": result.instant.completion_time,
            "records": result.records, "file_groups": result.file_groups,
            **({"warnings": list(result.warnings)} if result.warnings else {})}


def describe_conflict(exc: BaseException) -> dict[str, Any]:
    """A writer's result line for a lost conflict: an early one (found by the writer or decided
    outside: `aborted_by`) with its report."""
    from lakecore.errors import EarlyConflict

    if isinstance(exc, EarlyConflict):
        return {"early": True, **exc.report()}
    conflicts = getattr(exc, "conflicts", ())
    groups = sorted({g for c in conflicts for g in c.file_groups})
    return {"early": False, "instant": getattr(exc, "instant", ""),
            **({"other": max(c.theirs for c in conflicts)} if conflicts else {}),
            "file_groups": [[p, f] for p, f in groups[:100]], "message": str(exc)}


def main(argv: list[str] | None = None) -> int:
    from lakecore.errors import InvalidInput, InvalidTableConfig, TableNotFound, WriteConflict
    from sparkjobs.kafka.source import SourceUnavailable

    return run_job(lambda: BatchWriteArgs.from_argv(sys.argv[1:] if argv is None else argv), run,
                   done="committed", bad_input=(InvalidInput, InvalidTableConfig, TableNotFound),
                   conflict=(WriteConflict,), describe_conflict=describe_conflict,
                   unavailable=(SourceUnavailable,))


if __name__ == "__main__":
    sys.exit(main())
