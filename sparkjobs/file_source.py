"""How writers read file inputs (Parquet, JSON lines, CSV, ORC, any Spark file format).

CSV is read by its header (`header` is "true" unless spec.source.options says otherwise): a batch
writer gives each column of the (first file's) header that the table has the table's type, the others
stay strings (the write names them); a streaming writer reads with the table's schema. Either way
Spark checks each file's header against the schema it reads with (`enforceSchema` false), so a file
whose columns come in another order is refused, not shifted. CSV and JSON are read FAILFAST: a value
that does not fit its column's type, a malformed line, end the job as BadInput naming the file, the
row and the value (`unreadable`), never a null in its place. Without a header (`header: "false"`),
with `inferSchema` or another `mode`, the options are Spark's own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pyarrow as pa

from sparkjobs.contract import FILE_FORMATS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from sparkjobs.stream import Prepared

# enforceSchema false: Spark checks each file's header against the schema it is read with (by position
# otherwise: a file whose columns come in another order than the first's would be shifted)
DEFAULTS = {"csv": {"header": "true", "enforceSchema": "false", "mode": "FAILFAST"},
            "json": {"mode": "FAILFAST"}}


def options_for(fmt: str, options: Mapping[str, str]) -> dict[str, str]:
    """The reader options of a file source: the format's defaults, then the spec's."""
    defaults = DEFAULTS.get(fmt.lower(), {})
    given = {k.lower() for k in options}
    return {**{k: v for k, v in defaults.items() if k.lower() not in given}, **options}


def _on(options: Mapping[str, str], name: str) -> bool:
    return any(k.lower() == name.lower() and str(v).lower() == "true" for k, v in options.items())


def read_batch(spark: SparkSession, fmt: str, path: str, options: Mapping[str, str],
               schema: pa.Schema) -> DataFrame:
    """One batch input as a DataFrame; a CSV with a header typed by the table's `schema` (see above)."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StringType, StructField, StructType

    opts = options_for(fmt, options)
    reader = spark.read.format(fmt).options(**opts)
    if fmt.lower() != "csv" or not _on(opts, "header") or _on(opts, "inferSchema"):
        return reader.load(path)
    header = reader.load(path).columns   # no inference: Spark reads the header line only
    typed = StructType([StructField(c, from_arrow_type(schema.field(c).type) if c in schema.names
                                    else StringType()) for c in header])
    return spark.read.format(fmt).options(**opts).schema(typed).load(path)


_RECORD = re.compile(r"Malformed records are detected in record parsing: (\[[^\n]*?\])\.")
_HEADER = re.compile(r"CSV header does not conform to the schema\.\s*Header: (?P<header>[^\n]*)\n\s*"
                     r"Schema: (?P<schema>[^\n]*)\n(?:[^\n]*\n)?CSV file: (?P<file>\S+)")
_COUNT = re.compile(r"Number of column in CSV header is not equal to number of fields in the schema:\s*"
                    r"Header length: (?P<header>\d+), schema size: (?P<schema>\d+)\s*CSV file: (?P<file>\S+)")
_CAUSE = re.compile(r"Caused by: java\.[\w.]+?(?:NumberFormat|DateTime|DateTimeParse|Arithmetic)Exception: "
                    r"([^\n]+)")


_NO_SOURCE = re.compile(r"\[DATA_SOURCE_NOT_FOUND\] Failed to find the data source: ([^\s]+?)\.?\s")


def unreadable(exc: BaseException, path: str) -> str | None:
    """What to tell for a read that met a value its column's type cannot hold, a malformed line, a CSV
    header that does not match the schema, or a format Spark has no source for (None: `exc` is
    something else). Retrying cannot help any of them: the writer's input or spec is bad."""
    text = str(exc)
    unknown = _NO_SOURCE.search(text)
    if unknown is not None:
        from lakecore.config import did_you_mean

        name = unknown.group(1)
        return f"spec.source.format {name!r} is not a format Spark can read here" \
               f"{did_you_mean([name], FILE_FORMATS)}; its file formats: {', '.join(FILE_FORMATS)} (others " \
               "come with a package in spark.conf spark.jars.packages); fix spec.source.format"
    header = _HEADER.search(text)
    if header is not None:
        return f"the CSV file {header['file']} has the header {header['header']!r}, but this writer reads " \
               f"the columns {header['schema']!r} in that order; write its columns in that order"
    count = _COUNT.search(text)
    if count is not None:   # files of one source with different headers
        return f"the CSV file {count['file']} has {count['header']} columns in its header, but this writer " \
               f"reads {count['schema']}: give every file of the source the same header"
    record = _RECORD.search(text)
    if record is None:
        return None
    cause = _CAUSE.search(text)
    why = f" ({cause.group(1).strip()})" if cause else ""
    return f"the input {path!r} has a value that does not fit its column's type in the table{why}; the " \
           f"row, that value read as null: {record.group(1)}; fix the input"


@contextmanager
def told_as_bad_input(path: str) -> Iterator[None]:
    """Raise what `unreadable` tells of a failure inside as InvalidInput (the job's BadInput); anything
    else as it is."""
    try:
        yield
    except Exception as exc:
        told = unreadable(exc, path)
        if told is None:
            raise
        from lakecore.errors import InvalidInput

        raise InvalidInput(told) from exc


SAMPLED_LINES = 1000   # of a micro-batch's JSON files, read for the names of their fields


def batch_files(spark: SparkSession, checkpoint: str, batch_id: int) -> list[str]:
    """The files a file stream's micro-batch reads, from the source log Spark writes into the query's
    checkpoint before the batch runs (`sources/0/<id>`, or the `<n>.compact` file that holds it once
    compacted): a micro-batch's DataFrame does not name them (inputFiles() is empty in foreachBatch)."""
    import json

    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    logs = f"{checkpoint.rstrip('/')}/sources/0"
    for name in (str(batch_id), f"{batch_id}.compact"):   # every 10th log holds the ones before it too
        path = jvm.org.apache.hadoop.fs.Path(f"{logs}/{name}")   # type: ignore[union-attr]
        if path.getFileSystem(conf).exists(path):
            entries = [json.loads(r[0]) for r in spark.read.text(str(path.toString())).collect()
                       if r[0].startswith("{")]
            return [str(e["path"]) for e in entries if e.get("batchId") == batch_id]
    return []


def unknown_json_fields(spark: SparkSession, fmt: str, options: Mapping[str, str], names: list[str],
                        checkpoint: str) -> Callable[[DataFrame, int], Prepared] | None:
    """A streaming writer's check of each micro-batch of JSON lines: Spark reads them with the table's
    schema and drops, silently, a field the schema does not name (a misspelt `paeg` read as a null
    `page`), where a batch writer refuses it. The first SAMPLED_LINES lines of the micro-batch's files
    are read for their fields; one the table lacks is refused as the batch writer refuses it
    (SchemaMismatch, with the likely column). None for other formats, and for multiLine JSON."""
    if fmt.lower() != "json" or _on(options, "multiLine") or not checkpoint:
        return None

    def prepare(batch: DataFrame, batch_id: int) -> Prepared:
        import json

        from lakecore.config import did_you_mean
        from lakecore.errors import SchemaMismatch
        from sparkjobs.stream import Prepared

        files = batch_files(spark, checkpoint, batch_id)
        fields: set[str] = set()
        for row in spark.read.text(files).limit(SAMPLED_LINES).collect() if files else ():
            try:
                record = json.loads(row[0])
            except ValueError:
                continue   # a malformed line: the read itself refuses it (FAILFAST)
            if isinstance(record, dict):
                fields.update(str(k) for k in record)
        unknown = sorted(fields.difference(names))
        if unknown:   # the likely column among all the table's (another line may spell it right)
            raise SchemaMismatch(f"input fields {unknown} of {', '.join(sorted(files)[:3])} are not in the "
                                 f"table schema {names}{did_you_mean(unknown, names)}; a streaming writer "
                                 "would drop them: fix the input, or add them to the table (a LakeTable's "
                                 "spec.schema)")
        return Prepared(batch)

    return prepare
