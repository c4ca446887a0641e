"""The Spark jobs vs Spark's own Parquet writer and reader on the same DataFrames, one local session.

    python bench/spark_bench.py [--reps N] [--format 1]

Data: the peers' generator (1M base rows, an upsert of 100k rows, half of them updates), as Spark
DataFrames cached in memory before timing. Floors, in the same session and run:
  write:  df.write.parquet of the same DataFrame (Spark's native writer, same codec)
  read:   spark.read.parquet(...) of those files into Spark's noop sink (every column materialized)
Measured: write_dataframe bulk insert of the 1M rows and the upsert of 100k into a merge-on-read
table (4 buckets; a new table, so format 2: buckets from Spark's own hash() in the JVM), a compaction
run by sparkjobs.services.compact, and spark.read.format("weir").load(...) into the noop sink after
the upsert and after the compaction. Each read figure (the floor's too) is the median of three reads
in a row (`read_time`); the reported figure per measure is the median over `--reps` repetitions.
`--format 1` writes a format-1 table instead (table.json rewritten as an older lakecore made it:
bucket hash "weir_v1", which Spark cannot compute, so the write finds file groups through an Arrow
UDF): the route every write took before format 2.
Prints one JSON document; ratios are lakecore-on-Spark / Spark floor.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import datagen, median, timed

from lakecore import Table
from tests.support.formats import as_format_1

CODEC = "zstd"


def scan(df: object) -> None:
    """Materialize every row and column, write nothing (Spark's noop sink)."""
    df.write.format("noop").mode("overwrite").save()  # type: ignore[attr-defined]


def read_time(read: Any, times: int = 3) -> float:
    """A read's time: the median of `times` reads in a row (the floor's and lakecore's alike). One read
    alone mostly measures what the first query after a write pays once (Python workers and JIT warming
    up, caches), by a different amount for the JVM's reader and the Python data source."""
    return median([timed(read)[0] for _ in range(times)])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--format", type=int, choices=(1, 2), default=2)
    a = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from sparkjobs.services import compact
    from sparkjobs.session import local_session
    from sparkjobs.write import write_dataframe

    base, upsert = datagen().base_and_upsert()
    work = tempfile.mkdtemp(prefix="weir-spark-bench-")
    spark = local_session("weir-bench", cores=os.cpu_count() or 2, work_dir=os.path.join(work, "spark"))
    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.parquet.compression.codec", CODEC)
    try:
        base_df, upsert_df = spark.createDataFrame(base).cache(), spark.createDataFrame(upsert).cache()
        base_df.count(), upsert_df.count()
        times: dict[str, list[float]] = {k: [] for k in (
            "floor_write_1m", "floor_write_100k", "floor_read", "bulk_insert_1m", "upsert_100k",
            "read_after_upsert", "compaction", "read_after_compaction")}
        rows: dict[str, int] = {}
        info: dict[str, str] = {}

        def one_rep(root: str) -> dict[str, float]:
            took = {"floor_write_1m": timed(lambda: base_df.write.parquet(f"{root}/floor1m"))[0],
                    "floor_write_100k": timed(lambda: upsert_df.write.parquet(f"{root}/floor100k"))[0],
                    "floor_read": read_time(lambda: scan(spark.read.parquet(f"{root}/floor1m")))}
            t = Table.create(f"{root}/table", schema=base.schema, record_key="key", ordering_field="ts",
                             buckets=4, compression=CODEC)
            if a.format == 1:
                t = as_format_1(t)
            weir = spark.read.format("weir")
            took["bulk_insert_1m"] = timed(lambda: write_dataframe(base_df, t, "bulk_insert"))[0]
            took["upsert_100k"] = timed(lambda: write_dataframe(upsert_df, t, "upsert"))[0]
            took["read_after_upsert"] = read_time(lambda: scan(weir.load(t.uri)))
            took["compaction"] = timed(lambda: compact(spark, t))[0]
            took["read_after_compaction"] = read_time(lambda: scan(weir.load(t.uri)))
            rows["table"] = weir.load(t.uri).count()
            info["bucket_hash"] = str(t.config.bucket_hash)
            return took

        for rep in range(a.reps):
            root = os.path.join(work, f"rep{rep}")
            for k, v in one_rep(root).items():
                times[k].append(v)
            shutil.rmtree(root, ignore_errors=True)
        med = {k: round(median(v), 3) for k, v in times.items()}
        out = {
            "seconds": med, "rows": rows, "reps": a.reps, "cores": os.cpu_count(), **info,
            "loadavg": os.getloadavg(),
            "ratios": {
                "bulk_insert_1m / floor_write_1m": round(med["bulk_insert_1m"] / med["floor_write_1m"], 2),
                "upsert_100k / floor_write_100k": round(med["upsert_100k"] / med["floor_write_100k"], 2),
                "upsert_100k / floor_write_1m": round(med["upsert_100k"] / med["floor_write_1m"], 2),
                "read_after_upsert / floor_read": round(med["read_after_upsert"] / med["floor_read"], 2),
                "read_after_compaction / floor_read":
                    round(med["read_after_compaction"] / med["floor_read"], 2),
            },
        }
        print(json.dumps(out, indent=2))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
