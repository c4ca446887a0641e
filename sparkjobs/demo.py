"""`make demo`, second part: the same three streams, now as three concurrent Spark streaming writers.

Each stream (telemetry, location, status) is a Structured Streaming query with its own writer id and
checkpoint, reading Parquet files dropped into its own directory, out of order; the table is
non-blocking, so the three writers commit side by side with no conflicts. Then a compaction whose
operations run as Spark tasks, and a read through `spark.read.format("weir")` — equal to joining
each stream's latest values.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console

from lakecore import Table
from lakecore.demo import BATCHES, GROUPS, SCHEMA, joined_latest, show
from sparkjobs.services import compact
from sparkjobs.session import local_session
from sparkjobs.stream import write_stream


def main(argv: list[str] | None = None) -> int:
    console = Console(width=None if sys.stdout.isatty() else 150)
    base = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="weir-spark-demo-"))
    uri = str(base / "devices")
    table = Table.create(uri, schema=SCHEMA, record_key="device", column_groups=GROUPS, buckets=2,
                         concurrency_mode="non_blocking")
    console.print(f"[bold]Spark:[/bold] {table!r}, non-blocking concurrency; starting a local Spark ...")
    spark = local_session("weir-demo", cores=2, work_dir=str(base / "spark"))
    spark.sparkContext.setLogLevel("ERROR")
    try:
        queries = []
        for group in GROUPS:  # one streaming writer per stream, each with its own input directory
            incoming = base / "incoming" / group.name
            incoming.mkdir(parents=True)
            mine = [b for _, b in BATCHES if group.ordering_field in b.column_names]
            for n, batch in enumerate(mine):
                pq.write_table(batch, incoming / f"{n:03d}.parquet")
            schema = pa.schema([SCHEMA.field(c) for c in mine[0].column_names])
            from pyspark.sql.pandas.types import from_arrow_schema

            stream = spark.readStream.schema(from_arrow_schema(schema)).option("maxFilesPerTrigger", 1) \
                .parquet(str(incoming))
            queries.append(write_stream(stream, table, writer_id=group.name,
                                        checkpoint=str(base / "checkpoints" / group.name),
                                        trigger={"availableNow": True}))
        for q in queries:
            q.awaitTermination()
            if q.exception() is not None:
                raise RuntimeError(str(q.exception()))
        writes = [i for i in Table.open(uri).timeline().completed if i.action == "deltacommit"]
        console.print(f"  3 streaming writers committed {len(writes)} micro-batches, none aborted")

        outcome = compact(spark, Table.open(uri))
        console.print(f"  compaction {outcome.instant}: {outcome.operations} operations ran as Spark tasks")

        read = spark.read.format("weir").load(uri)
        stitched = pa.Table.from_pylist([r.asDict() for r in read.collect()], schema=SCHEMA)
        show(console, 'spark.read.format("weir") after the compaction', stitched)
        same = stitched.sort_by("device").equals(joined_latest([b for _, b in BATCHES]).sort_by("device"))
        console.print(f"Equal to joining each stream's latest values: [bold]{same}[/bold]")
        console.print(f"\nTable kept at {uri}")
        return 0 if same else 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
