"""Kafka messages -> rows of the table, as Spark SQL expressions (no Python per message).

    json      the value is a JSON object of the writer's columns (the table's, or its column group's: the
              key, partition fields, the group's columns and ordering field); other fields are ignored
    avro      the value is Avro binary of an inline writer schema (from_avro; no schema registry: inline
              schemas only) whose record has fields named like the columns
    debezium  the value is a Debezium change event in JSON (the envelope at the top, or under `payload` with
              the converter's schemas): op c/r/u take `after` as an upsert, d takes `before` as a delete; the
              table's ordering field is the event's source timestamp (`source.ts_ms`, else `ts_ms`);
              tombstones (null values after a delete) carry nothing and are counted, not written (a
              null value in json or avro is a bad message)

Every row keeps its message's topic, partition, offset, key and value, and gets ERROR: null when it decodes,
else why not (not JSON, no record key, an unknown op, ...). Must not decide what bad messages do
(bad_records.py) or write.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql.functions import coalesce, col, from_json, lit, struct, timestamp_millis, when
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import ByteType, LongType, StringType, StructField, StructType, TimestampType

from lakecore.config import OP, OP_DELETE, OP_UPSERT, TableConfig
from lakecore.errors import InvalidInput

ERROR = "_weir_error"
TOMBSTONE = "_weir_tombstone"
SOURCE = ("topic", "partition", "offset", "key", "value")   # what every decoded row keeps of its message
_CORRUPT = "_weir_corrupt"
_TS = "_weir_event_ts"


def decode(messages: DataFrame, config: TableConfig, columns: list[str], value_format: str,
           avro_schema: str | None = None) -> DataFrame:
    """Spark's Kafka rows -> `columns` (+ OP for debezium) + ERROR + TOMBSTONE + SOURCE."""
    types = from_arrow_schema(pa.schema([config.schema.field(c) for c in columns]))
    if value_format == "json":
        parsed = from_json(col("value").cast("string"), _with_corrupt(types), _PERMISSIVE)
        problem = when(parsed[_CORRUPT].isNotNull(), lit("not a JSON object of the columns' types"))
        row = parsed
        rows = messages.select(*SOURCE, row.alias("_r"), problem.alias("_p"))
        out = rows.select(*SOURCE, *[col("_r")[c].alias(c) for c in columns], col("_p"))
        return _finish(out, config, columns, changes=False)
    if value_format == "avro":
        return _avro(messages, config, columns, types, avro_schema)
    if value_format == "debezium":
        return _debezium(messages, config, columns, types)
    raise InvalidInput(f"unknown value format {value_format!r}; use json, avro or debezium")


_PERMISSIVE = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}


def _with_corrupt(types: StructType) -> StructType:
    return StructType([*types.fields, StructField(_CORRUPT, StringType())])


def _avro(messages: DataFrame, config: TableConfig, columns: list[str], types: StructType,
          avro_schema: str | None) -> DataFrame:
    from pyspark.sql.avro.functions import from_avro

    if not avro_schema:
        raise InvalidInput("value format avro needs the values' Avro schema (source.kafka.value.avroSchema)")
    try:
        fields = {f["name"] for f in json.loads(avro_schema)["fields"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(f"the Avro schema is not a JSON record schema ({exc}); fix "
                           "source.kafka.value.avroSchema") from None
    missing = [c for c in columns if c not in fields]
    if missing:
        raise InvalidInput(f"the Avro schema has no field(s) {', '.join(missing)} of the writer's columns; "
                           "add them to the schema or write a column group that has none of them")
    record = from_avro(col("value"), avro_schema, {"mode": "PERMISSIVE"})
    rows = messages.select(*SOURCE, record.alias("_r"))
    out = rows.select(*SOURCE, *[col("_r")[c].try_cast(types[c].dataType).alias(c) for c in columns],
                      when(col("_r").isNull(), lit("not Avro of the given schema")).alias("_p"))
    return _finish(out, config, columns, changes=False)


def _debezium(messages: DataFrame, config: TableConfig, columns: list[str], types: StructType) -> DataFrame:
    if len(config.ordering_fields) != 1:
        raise InvalidInput("a Debezium source needs a table with one ordering field (it takes the events' "
                           "source timestamps); set orderingField")
    ordering = config.ordering_fields[0]
    image = StructType([f for f in types.fields if f.name != ordering])
    envelope = StructType([StructField("before", image), StructField("after", image),
                           StructField("op", StringType()), StructField("ts_ms", LongType()),
                           StructField("source", StructType([StructField("ts_ms", LongType())]))])
    schema = StructType([*envelope.fields, StructField("payload", envelope),
                         StructField(_CORRUPT, StringType())])
    j = from_json(col("value").cast("string"), schema, _PERMISSIVE)
    top = struct(*[j[f.name].alias(f.name) for f in envelope.fields])
    event = when(j["payload"].isNotNull(), j["payload"]).otherwise(top)
    events = messages.select(*SOURCE, j.alias("_j"), event.alias("_e"))
    op = col("_e.op")
    image_of = when(op == "d", col("_e.before")).otherwise(col("_e.after"))
    ts = coalesce(col("_e.source.ts_ms"), col("_e.ts_ms"))
    problem = (when(col("_j")[_CORRUPT].isNotNull(), lit("not a Debezium change event in JSON"))
               .when(op.isNull() | ~op.isin("c", "r", "u", "d"),
                     lit("not a Debezium change event (op is not c, r, u or d)"))
               .when(image_of.isNull(), lit("a Debezium change event without its row image (before/after)"))
               .when(ts.isNull(), lit("a Debezium change event without a source timestamp (source.ts_ms)")))
    stored = config.schema.field(ordering).type
    ts_value: Column = timestamp_millis(ts).cast(TimestampType()) if pa.types.is_timestamp(stored) \
        else ts.try_cast(types[ordering].dataType)
    rows = events.select(*SOURCE, image_of.alias("_r"), ts_value.alias(_TS), problem.alias("_p"),
                         when(op == "d", lit(OP_DELETE)).otherwise(lit(OP_UPSERT)).cast(ByteType()).alias(OP))
    out = rows.select(*SOURCE, *[(col(_TS) if c == ordering else col("_r")[c]).alias(c) for c in columns],
                      col(OP), col("_p"))
    return _finish(out, config, columns, changes=True)


def _finish(rows: DataFrame, config: TableConfig, columns: list[str], *, changes: bool) -> DataFrame:
    """ERROR: the decoder's problem, else a missing value a write refuses (key, partition field, ordering
    field, a non-nullable column of an upsert); TOMBSTONE: a null value."""
    deletes = (col(OP) == lit(OP_DELETE)) if changes else lit(False)
    needed = [*config.record_key, *[f for f in config.partition_fields if f not in config.record_key]]
    # a null value: a Debezium tombstone (after a delete, for log compaction) says nothing more; anywhere
    # else it is a message without content
    empty = lit(None).cast(StringType()) if changes else lit("an empty value (null)")
    error: Any = when(col("value").isNull(), empty).when(col("_p").isNotNull(), col("_p"))
    for name in needed:
        error = error.when(col(name).isNull(),
                           lit(f"no value for the record key or partition field {name!r}"))
    upsert_needs = [c for c in columns if c not in needed and
                    (c in config.ordering_fields or not config.schema.field(c).nullable)]
    for name in upsert_needs:
        error = error.when(~deletes & col(name).isNull(),
                           lit(f"no value for {name!r}, which every upsert needs"))
    kept = [*SOURCE, *columns, *([OP] if changes else [])]
    return rows.select(*kept, error.alias(ERROR), (col("value").isNull() & lit(changes)).alias(TOMBSTONE))
