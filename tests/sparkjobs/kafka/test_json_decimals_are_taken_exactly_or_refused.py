"""A JSON number a decimal column cannot hold exactly is a bad message, as the file path refuses it:
Spark's JSON parser rounded it into the column's scale without a word (1.234 into decimal(10,2) was
stored as 1.23, 1.005 as 1.01). Exact ones and whole numbers are taken as they are. A message with text
after its object is bad too: Spark read the first object and dropped the rest without a word."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType

from lakecore.config import TableConfig
from sparkjobs.kafka.values import ERROR, decode

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()),
                    ("amount", pa.decimal128(10, 2))])
MESSAGES = StructType([StructField("topic", StringType()), StructField("partition", IntegerType()),
                       StructField("offset", LongType()), StructField("key", BinaryType()),
                       StructField("value", BinaryType())])


def test_a_json_number_a_decimal_would_round_is_a_bad_message(spark, tmp_path) -> None:
    config = TableConfig(name="t", schema=SCHEMA, record_key=("id",), ordering_field="ts",
                         merge_mode="event_time")
    values = ['{"id": 1, "ts": 1, "amount": 19.99}', '{"id": 2, "ts": 1, "amount": 1.234}',
              '{"id": 3, "ts": 1, "amount": 1.005}', '{"id": 4, "ts": 1, "amount": 7}',
              '{"id": 5, "ts": 1, "amount": 99999999.999}', '{"id": 6, "ts": 1, "amount": 6.60000}',
              '{"id": 7, "ts": 1}', '{"id": 8, "ts": 1, "amount": -0.1}']
    messages = spark.createDataFrame(
        [("t", 0, i, b"k", v.encode()) for i, v in enumerate(values)], MESSAGES)
    got = {r["id"]: (r["amount"], r[ERROR])
           for r in decode(messages, config, ["id", "ts", "amount"], "json").collect()}
    exact = {1: Decimal("19.99"), 4: Decimal("7.00"), 6: Decimal("6.60"), 7: None, 8: Decimal("-0.10")}
    assert {k: v for k, (v, e) in got.items() if e is None} == exact, got
    assert got[2][1] == "column 'amount': 1.234 does not fit decimal(10,2) exactly; round it in the " \
                        "message, or give the column a larger scale", got
    assert "1.005 does not fit" in got[3][1] and "99999999.999 does not fit" in got[5][1], got


def test_text_after_the_object_makes_a_bad_message(spark) -> None:
    config = TableConfig(name="t", schema=SCHEMA, record_key=("id",), ordering_field="ts",
                         merge_mode="event_time")
    values = ['{"id": 1, "ts": 1} trailing', '{"id": 2, "ts": 1}{"id": 3, "ts": 1}',
              '{"id": 4, "ts": 1} {"id": 5, "ts": 1}', '{"id": 6, "ts": 1, "note": "} {"}  \n',
              '{"id": 7, "ts": 1, "n": {"a": 1}, "m": {"b": 2}}', '  {"id": 8, "ts": 1}\t']
    messages = spark.createDataFrame(
        [("t", 0, i, b"k", v.encode()) for i, v in enumerate(values)], MESSAGES)
    got = {r["id"]: r[ERROR] for r in decode(messages, config, ["id", "ts", "amount"], "json").collect()}
    bad = "not one JSON object: text follows the object"
    assert got == {1: bad, 2: bad, 4: bad, 6: None, 7: None, 8: None}, got


def test_a_value_of_the_wrong_type_is_named(spark) -> None:
    """The reason said only "not a JSON object of the columns' types", naming neither column nor value."""
    config = TableConfig(name="t", schema=SCHEMA, record_key=("id",), ordering_field="ts",
                         merge_mode="event_time")
    values = ['{"id": 1, "ts": "soon"}', '{"id": 2, "ts": 1, "amount": [1, 2]}', '{not json',
              '{"id": 4, "ts": null, "amount": 1.5}']
    messages = spark.createDataFrame(
        [("t", 0, i, b"k", v.encode()) for i, v in enumerate(values)], MESSAGES)
    got = {r["offset"]: r[ERROR] for r in decode(messages, config, ["id", "ts", "amount"], "json").collect()}
    assert got == {0: "column 'ts': soon is no bigint value",
                   1: "column 'amount': [1,2] is no decimal(10,2) value",
                   2: "not a JSON object of the columns' types",
                   3: "no value for 'ts', which every upsert needs"}, got
