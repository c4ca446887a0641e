"""Kafka messages -> rows of the table, as Spark SQL expressions (no Python per message).

    json      the value is a JSON object of the writer's columns (the table's, or its column group's: the
              key, partition fields, the group's columns and ordering field); other fields are ignored,
              but a field close to the name of a column the message lacks is a bad message (a misspelling
              would otherwise be written as a null column: `_misspelt`)
    avro      the value is Avro binary of an inline writer schema (from_avro) whose record has fields named
              like the columns; or, with a schema registry, in the Confluent wire format (registry.py): each
              message decodes with the writer schema of its id (fetched by the caller: `writer_schemas`), and
              its fields land in the columns of the same names, cast to the table's types (a column an id's
              schema lacks, e.g. one added in a later schema, is null for its messages)
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
from collections.abc import Callable, Mapping
from functools import reduce
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql.functions import coalesce, col, from_json, lit, struct, timestamp_millis, when
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import (
    ByteType,
    DecimalType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from lakecore.config import OP, OP_DELETE, OP_UPSERT, TableConfig
from lakecore.errors import InvalidInput
from sparkjobs.kafka import registry
from sparkjobs.kafka.registry import WriterSchema

ERROR = "_weir_error"
TOMBSTONE = "_weir_tombstone"
SOURCE = ("topic", "partition", "offset", "key", "value")   # what every decoded row keeps of its message
_CORRUPT = "_weir_corrupt"
_TS = "_weir_event_ts"


def decode(messages: DataFrame, config: TableConfig, columns: list[str], value_format: str,
           avro_schema: str | None = None,
           writer_schemas: Mapping[int, WriterSchema] | None = None) -> DataFrame:
    """Spark's Kafka rows -> `columns` (+ OP for debezium) + ERROR + TOMBSTONE + SOURCE. Avro: an inline
    `avro_schema`, or `writer_schemas` (every schema id of the batch: registry.batch_schema_ids)."""
    types = from_arrow_schema(pa.schema([config.schema.field(c) for c in columns]))
    if value_format == "json":
        text = col("value").cast("string")
        parsed = from_json(text, _with_corrupt(_wide_decimals(types)), _PERMISSIVE)
        decimals = {f.name: f.dataType for f in types.fields if isinstance(f.dataType, DecimalType)}
        narrow = {c: parsed[c].try_cast(kind) for c, kind in decimals.items()}
        problem = coalesce(when(parsed[_CORRUPT].isNotNull(), _mistyped(text, parsed, types)),
                           _trailing(text),
                           *[_inexact(c, parsed[c], narrow[c], kind) for c, kind in decimals.items()],
                           _misspelt(text, parsed, columns))
        rows = messages.select(*SOURCE, parsed.alias("_r"), problem.alias("_p"))
        out = rows.select(*SOURCE, *[(col("_r")[c].try_cast(decimals[c]) if c in decimals else col("_r")[c])
                                     .alias(c) for c in columns], col("_p"))
        return _finish(out, config, columns, changes=False)
    if value_format == "avro" and writer_schemas is not None and not avro_schema:
        return _registry_avro(messages, config, columns, types, writer_schemas)
    if value_format == "avro":
        return _avro(messages, config, columns, types, avro_schema)
    if value_format == "debezium":
        return _debezium(messages, config, columns, types)
    raise InvalidInput(f"unknown value format {value_format!r}; use json, avro or debezium")


_PERMISSIVE = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}


def _misspelt(text: Column, parsed: Column, columns: list[str]) -> Column:
    """Why a JSON message is bad where a column it lacks (null) is likely misspelt among its fields: a
    field that is no column, within an edit or two of the column's name (case aside), e.g. `itm` for
    `item`, which would be written as a null `item` with no word. Other fields the table lacks are
    ignored (producers add fields). The message's keys are read again only for a row with a null
    column (Spark evaluates a `when` branch only where it holds)."""
    from pyspark.sql import functions as F

    known = F.array(*[lit(c) for c in columns])

    def near(c: str) -> Callable[[Column], Column]:   # one argument: Spark's lambda over the keys
        edits = 1 if len(c) < 4 else 2
        return lambda k: ~F.array_contains(known, k) & (F.levenshtein(F.lower(k), lit(c.lower())) <= edits)

    found: Column | None = None
    for c in columns:
        close = F.filter(F.json_object_keys(text), near(c))
        said = when(parsed[c].isNull() & (F.size(close) > 0),
                    F.concat(lit("field '"), F.element_at(close, 1),
                             lit(f"' is no column; did you mean '{c}'? (else {c} would be written as null)")))
        found = said if found is None else coalesce(found, said)
    return found if found is not None else lit(None).cast(StringType())


def _mistyped(text: Column, parsed: Column, types: StructType) -> Column:
    """Why a JSON message Spark could not parse into the columns' types is bad: the first column whose
    field has a value (not JSON null) that did not convert, named with the value and the type (Spark
    keeps the fields that did convert), else that it is no JSON object of the columns' types. Evaluated
    for such messages only."""
    from pyspark.sql import functions as F

    named = []
    for f in types.fields:
        raw = F.get_json_object(text, "$['" + f.name.replace("'", "") + "']")
        named.append(when(parsed[f.name].isNull() & raw.isNotNull(),
                          F.concat(lit(f"column '{f.name}': "), F.substring(raw, 1, 80),
                                   lit(f" is no {f.dataType.simpleString()} value"))))
    return coalesce(*named, lit("not a JSON object of the columns' types"))


def _trailing(text: Column) -> Column:
    """Why a JSON message is bad where text follows its object (`{...} xyz`, `{...}{...}`): Spark's parser
    reads the first object and ignores the rest, so the rest would be lost without a word. A message is
    parsed again (as the one element of an array, which refuses anything after it) only where it does not
    end with its object's `}` or holds `}` then `{` with only blanks between, which no valid object does
    outside its strings."""
    from pyspark.sql import functions as F

    suspect = ~text.rlike(r"\}\s*$") | text.rlike(r"\}\s*\{")
    return when(suspect & F.json_array_length(F.concat(lit("["), text, lit("]"))).isNull(),
                lit("not one JSON object: text follows the object"))


def _wide_decimals(types: StructType) -> StructType:
    """`types` with each decimal column read at the most fractional digits its integer digits leave
    (decimal(10,2) as decimal(38,30)): Spark's JSON parser rounds a number into a decimal's scale
    without a word (1.234 into decimal(10,2) was stored as 1.23); read wide, a rounding is seen."""
    return StructType([StructField(f.name, DecimalType(38, 38 - (f.dataType.precision - f.dataType.scale)),
                                   f.nullable) if isinstance(f.dataType, DecimalType) else f
                       for f in types.fields])


def _inexact(name: str, wide: Column, narrow: Column, kind: DecimalType) -> Column:
    """Why a JSON number is a bad message where the column's decimal cannot hold it exactly (None when
    it can): as the file path refuses it, never stored rounded."""
    from pyspark.sql import functions as F

    return when(wide.isNotNull() & ~wide.eqNullSafe(narrow),
                F.concat(lit(f"column '{name}': "), F.regexp_replace(wide.cast(StringType()), r"\.?0+$", ""),
                         lit(f" does not fit decimal({kind.precision},{kind.scale}) exactly; round it in the "
                             "message, or give the column a larger scale")))


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
                      when(_undecoded(col("_r"), fields), lit("not Avro of the given schema")).alias("_p"))
    return _finish(out, config, columns, changes=False)


def _registry_avro(messages: DataFrame, config: TableConfig, columns: list[str], types: StructType,
                   schemas: Mapping[int, WriterSchema]) -> DataFrame:
    """Confluent-framed Avro: one from_avro per schema id (each on its own messages only), the columns
    taken from whichever decoded."""
    from pyspark.sql.avro.functions import from_avro

    value = col("value")
    framed, schema_id, body = registry.framed(value), registry.schema_id(value), registry.body(value)
    problems = {i: w.problem for i, w in schemas.items() if w.problem}
    fields: dict[int, set[str]] = {}
    records: dict[int, Column] = {}
    for i, w in schemas.items():
        names = _record_fields(w.schema) if w.schema else None
        if w.schema is None or names is None:
            problems.setdefault(i, f"schema id {i} is not an Avro record schema")
            continue
        fields[i] = names
        records[i] = when(framed & (schema_id == i), from_avro(body, w.schema, {"mode": "PERMISSIVE"}))
    rows = messages.select(*SOURCE, framed.alias("_framed"), schema_id.alias("_id"),
                           *[r.alias(f"_r{i}") for i, r in records.items()])

    def column(c: str) -> Column:
        taken = [col(f"_r{i}")[c].try_cast(types[c].dataType) for i in fields if c in fields[i]]
        return coalesce(*taken, lit(None).cast(types[c].dataType))   # no id's schema has it: null

    problem: Any = when(~col("_framed"), lit("not in the Confluent wire format (magic byte 0, then a schema "
                                             "id)"))
    for i, why in sorted(problems.items()):
        problem = problem.when(col("_id") == i, lit(why))
    for i in sorted(fields):
        problem = problem.when((col("_id") == i) & _undecoded(col(f"_r{i}"), fields[i]),
                               lit(f"not Avro of its schema (id {i}) from the schema registry"))
    problem = problem.when(~col("_id").isin(list(schemas)), lit("a schema id the registry was not asked for"))
    out = rows.select(*SOURCE, *[column(c).alias(c) for c in columns], problem.alias("_p"))
    return _finish(out, config, columns, changes=False)


def _undecoded(record: Column, fields: set[str]) -> Column:
    """from_avro's PERMISSIVE result for bytes that are not Avro of its schema: null, or (Spark 4) a record
    with every field null (a record that truly has none has no record key either: bad all the same)."""
    every_null = [record[f].isNull() for f in sorted(fields)]
    return record.isNull() | reduce(lambda a, b: a & b, every_null, lit(True))


def _record_fields(schema: str) -> set[str] | None:
    """The field names of an Avro record schema (JSON), or None when it is not one."""
    try:
        found = json.loads(schema)
        return {str(f["name"]) for f in found["fields"]} if found.get("type") == "record" else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


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
