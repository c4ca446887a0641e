"""Format-2 tables put a row in bucket pmod(hash(keys), buckets) with Spark's own Murmur3 `hash()`:
lakecore's numpy implementation gives, for every record-key type it accepts, exactly what the real
Spark computes, column by column and chained over composite keys; types Spark has no counterpart
for are refused, and tables keyed by them keep the format-1 hash."""

from __future__ import annotations

import decimal
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakecore.config import TableConfig
from lakecore.errors import InvalidTableConfig, UnsupportedType
from lakecore.layout import buckets, murmur3

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)  # any Unicode but surrogates
BIG = 10**38 - 1
EDGES = [s * (2**k + d) for k in (7, 8, 15, 16, 23, 31, 63, 64, 120, 125)
         for d in (-1, 0, 1) for s in (1, -1)]

# (Arrow type, strategy of its stored values) for every type a record key may have and Spark can hash
KEY_TYPES: dict[str, tuple[pa.DataType, st.SearchStrategy]] = {
    "b": (pa.bool_(), st.booleans()),
    "i8": (pa.int8(), st.integers(-(2**7), 2**7 - 1)),
    "i16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "i32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "i64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "s": (pa.string(), TEXT),
    "ls": (pa.large_string(), TEXT),
    "bin": (pa.binary(), st.binary(max_size=40)),
    "lbin": (pa.large_binary(), st.binary(max_size=40)),
    "date": (pa.date32(), st.integers(-700_000, 2_900_000)),            # days: years 0084..9909
    "ts_us": (pa.timestamp("us", "UTC"), st.integers(-(2**57), 2**57)),
    "ts_ms": (pa.timestamp("ms", "UTC"), st.integers(-(2**47), 2**47)),
    "ts_s": (pa.timestamp("s", "UTC"), st.integers(-(2**37), 2**37)),
    "ts_ntz": (pa.timestamp("us"), st.integers(-(2**57), 2**57)),
    # a Spark value stored as nanoseconds is a whole number of microseconds
    "ts_ns": (pa.timestamp("ns", "UTC"), st.integers(-(2**52), 2**52).map(lambda v: v * 1000)),
    "dec18": (pa.decimal128(18, 3), st.integers(-(10**18) + 1, 10**18 - 1)),     # unscaled values
    "dec9": (pa.decimal128(9, 0), st.integers(-(10**9) + 1, 10**9 - 1)),
    "dec38": (pa.decimal128(38, 6), st.one_of(st.integers(-BIG, BIG), st.sampled_from(EDGES))),
    "dec20": (pa.decimal128(20, 2), st.one_of(st.integers(-(10**20) + 1, 10**20 - 1),
                                              st.sampled_from([e for e in EDGES if abs(e) < 10**20]))),
}


def _arrow(t: pa.DataType, values: list) -> pa.Array:
    if pa.types.is_decimal(t):
        exact = decimal.Context(prec=60)
        return pa.array([decimal.Decimal(v).scaleb(-t.scale, exact) for v in values], t)
    if pa.types.is_date32(t):
        return pa.array(values, pa.int32()).cast(t)
    if pa.types.is_timestamp(t):
        return pa.array(values, pa.int64()).cast(t)
    return pa.array(values, t)


@st.composite
def key_tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 60))
    return pa.table({name: _arrow(t, draw(st.lists(values, min_size=n, max_size=n)))
                     for name, (t, values) in KEY_TYPES.items()})


@pytest.mark.spark
@settings(max_examples=8, deadline=None,  # one Spark query each: few examples, many rows
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(table=key_tables(), n=st.integers(1, 1000), composite=st.permutations(list(KEY_TYPES)))
def test_every_key_type_hashes_and_buckets_as_spark_does(spark, table, n, composite):
    from pyspark.sql import functions as F

    df = spark.createDataFrame(table)
    pair = composite[:2]
    got = df.select(*[F.hash(c).alias(c) for c in table.column_names],
                    F.hash(*composite).alias("all"),
                    F.pmod(F.hash(*composite), F.lit(n)).alias("bucket_all"),
                    F.pmod(F.hash(*pair), F.lit(n)).alias("bucket_pair")).toArrow()
    for c in table.column_names:
        assert murmur3.spark_hash([table[c]]).tolist() == got[c].to_pylist(), c
    columns = [table[c] for c in composite]
    assert murmur3.spark_hash(columns).tolist() == got["all"].to_pylist()
    assert murmur3.bucket_of(columns, n).tolist() == got["bucket_all"].to_pylist()
    assert murmur3.bucket_of([table[c] for c in pair], n).tolist() == got["bucket_pair"].to_pylist()


@given(values=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=200),
       n=st.integers(2, 70_000), repeat=st.integers(1, 2))
@settings(max_examples=30, deadline=None)
def test_bucket_of_is_the_hash_taken_modulo_over_chunks_and_slices(values, n, repeat):
    # the chunked, in-place bucket_of equals pmod of the whole-array hash, for sliced arrays too
    ints = pa.array(values * repeat * 400, pa.int64()).slice(3)
    text = pa.array([str(v) for v in values] * repeat * 400).slice(5)
    for keys in ([ints], [text], [text, ints]):
        whole = np.mod(murmur3.spark_hash(keys).astype(np.int64), n)
        assert murmur3.bucket_of(keys, n).tolist() == whole.tolist()


def test_known_values_of_sparks_hash():
    # SELECT hash(1), hash(1L), hash('') , hash(true) in Spark SQL
    assert murmur3.spark_hash([pa.array([1], pa.int32())]).tolist() == [-559580957]
    assert murmur3.spark_hash([pa.array([1], pa.int64())]).tolist() == [-1712319331]
    assert murmur3.spark_hash([pa.array([""])]).tolist() == [142593372]
    assert murmur3.spark_hash([pa.array([datetime(1970, 1, 1, tzinfo=UTC)])]).tolist() == \
        murmur3.spark_hash([pa.array([0], pa.int64())]).tolist()


def test_key_types_without_a_spark_counterpart_are_refused_and_keep_the_old_hash():
    for t in (pa.uint8(), pa.uint32(), pa.uint64(), pa.time64("us")):
        assert not murmur3.supports(t)
        with pytest.raises(UnsupportedType, match="no Spark Murmur3"):
            murmur3.bucket_of([pa.array([1, 2], pa.int64()).cast(t)], 4)
        schema = pa.schema([("k", t), ("v", pa.string())])
        assert TableConfig(name="t", schema=schema, record_key=("k",)).bucket_hash == "weir_v1"
        with pytest.raises(InvalidTableConfig, match="no Spark Murmur3 hash; use bucket_hash 'weir_v1'"):
            TableConfig(name="t", schema=schema, record_key=("k",), bucket_hash="spark_murmur3")
    keys = pa.array([1, 2, 3], pa.uint32())
    assert buckets.table_bucket_of([keys], 4, "weir_v1").tolist() == buckets.bucket_of([keys], 4).tolist()
