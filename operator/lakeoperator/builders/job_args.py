"""LakeWriter / TableService specs -> the jobs' argument dataclasses (sparkjobs.contract).

Owns the mapping from the API's fields to the jobs' command lines: table URI, the table's recorded
lock (a ZooKeeper connect string only when the table records one), early detection, the storage
options by reference (never values: the Secret reaches every process as the WEIR_STORAGE_OPTIONS
variable), the streaming writer's stable id and checkpoint. Must not build Kubernetes objects
(driver_pod.py does) nor import pyspark (import-linter: the operator sees sparkjobs.contract only).
"""

from __future__ import annotations

from dataclasses import fields

from lakeoperator.specs import (
    LakeTableSpec,
    LakeWriterSpec,
    ObjectRef,
    StorageSpec,
    TableServiceSpec,
)
from sparkjobs.contract import BatchWriteArgs, KafkaArgs, StreamWriteArgs, TableServiceArgs, WriterArgs

STORAGE_ENV = "WEIR_STORAGE_OPTIONS"  # the variable driver and executors read the table's options from
# the variables driver and executors read their ZooKeeper credentials from (lakecore.concurrency.zookeeper)
ZOOKEEPER_USERNAME_ENV = "WEIR_ZOOKEEPER_USERNAME"
ZOOKEEPER_PASSWORD_ENV = "WEIR_ZOOKEEPER_PASSWORD"
# the variable a writer's driver reads its Kafka source's secret consumer properties from (a Secret's JSON)
KAFKA_OPTIONS_ENV = "WEIR_KAFKA_OPTIONS"
# the variable it reads its schema registry's user:password from (source.kafka.value.schemaRegistry)
SCHEMA_REGISTRY_AUTH_ENV = "WEIR_SCHEMA_REGISTRY_AUTH"


def storage_env(storage: StorageSpec) -> str | None:
    """The variable the Secret with the table's storage options is exposed as, if there is one."""
    return STORAGE_ENV if storage.secret_ref is not None else None


def zookeeper_of(table: LakeTableSpec) -> str | None:
    """The connect string of the table's recorded ZooKeeper lock (jobs must name it; None: storage)."""
    return table.lock.connect


def checkpoint_of(owner: ObjectRef, table: LakeTableSpec) -> str:
    """Where a streaming writer keeps Spark's checkpoint: with the table, one directory per writer
    resource, so a restarted (or rescheduled) writer finds its progress."""
    return f"{table.location.rstrip('/')}/.weir/checkpoints/{owner.namespace}.{owner.name}"


def writer_args(owner: ObjectRef, writer: LakeWriterSpec, table: LakeTableSpec, *,
                source_location: str | None = None) -> BatchWriteArgs | StreamWriteArgs:
    """The job arguments of a LakeWriter. `source_location`: the location of `source.table` (a Weir
    table read incrementally), resolved by the caller (which reports a missing one: reconcile.py)."""
    source = writer.source
    kafka: dict[str, object] = {}
    if source.table is not None:
        assert source_location is not None, "the caller resolves source.table first"
        path, fmt = source_location, "weir"
    elif source.kafka is not None:
        path, fmt = "", source.format
        kafka_args = source.kafka.args(KAFKA_OPTIONS_ENV, SCHEMA_REGISTRY_AUTH_ENV)
        kafka = {f.name: getattr(kafka_args, f.name) for f in fields(KafkaArgs)}
    else:
        assert source.path is not None  # specs: exactly one of path / table / kafka
        path, fmt = source.path, source.format
    early = table.concurrency.early_detection.strategy
    batch = BatchWriteArgs(
        **kafka,  # type: ignore[arg-type]
        table=table.location, source=path, source_format=fmt, operation=writer.operation,
        source_options=dict(source.options), zookeeper=zookeeper_of(table),
        early_detection=None if early == "none" else early,
        extra={"writer": f"{owner.namespace}/{owner.name}"}, column_group=writer.column_group,
        heartbeat_interval_s=float(table.heartbeat.interval_seconds),
        heartbeat_misses=table.heartbeat.tolerable_misses,
        storage_options_env=storage_env(table.storage), storage_options=dict(table.storage.options),
        app_name=f"weir-{owner.name}")
    if writer.mode == "batch":
        return batch
    trigger = writer.trigger
    common = {f.name: getattr(batch, f.name) for f in fields(WriterArgs)}
    return StreamWriteArgs(**common, writer_id=f"{owner.namespace}/{owner.name}",
                           checkpoint=checkpoint_of(owner, table),
                           trigger_seconds=None if trigger.available_now else trigger.interval_seconds,
                           available_now=trigger.available_now, app_name=f"weir-{owner.name}")


def service_args(owner: ObjectRef, service: TableServiceSpec, table: LakeTableSpec) -> TableServiceArgs:
    p = service.policy
    return TableServiceArgs(table=table.location, service=service.type, zookeeper=zookeeper_of(table),
                            compaction_strategy=p.compaction_strategy,
                            clustering_strategy=p.clustering_strategy,
                            sort_columns=tuple(p.sort_columns), clean_policy=p.clean_policy,
                            clean_retained=p.clean_retained, archive_min_instants=p.archive_min_instants,
                            archive_max_instants=p.archive_max_instants, app_name=f"weir-{owner.name}",
                            storage_options_env=storage_env(table.storage),
                            storage_options=dict(table.storage.options))
