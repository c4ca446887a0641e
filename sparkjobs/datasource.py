"""`spark.read.format("weir").load(uri)`: a Spark Python data source over a lakecore table.

One Spark partition per file slice: each task merges its slice (base file + log files, per the
table's merge mode) with lakecore's vectorized reader and hands Spark Arrow batches. Options:

    asOf          time travel: an instant time or an ISO timestamp (default: latest)
    queryType     snapshot (default) | read_optimized (base files only, merge-on-read)
    storage.<k>   storage options for the table's URI (e.g. storage.key, storage.endpoint_url)
    storageOptionsEnv, storageOptionsFile
                  storage options by reference: an environment variable / a JSON file holding
                  them, read in each process (the plan Spark pickles carries the names only)

Equality and IN filters on partition fields prune file slices before any task runs; every other
filter is left to Spark. Register once per session: `register(spark)` (the jobs' sessions do).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, Filter, In, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from lakecore import Table
from lakecore.concurrency import view_of
from lakecore.config import TableConfig
from lakecore.layout import FileSlice
from lakecore.read.scan import Scan, ScanPlan
from lakecore.read.slices import merge_columns
from lakecore.read.snapshot import prune
from lakecore.services import check_readable
from lakecore.storage import OptionsRef, Storage
from lakecore.timeline import TimelineStore, parse_point_in_time

NAME = "weir"


def register(spark: SparkSession) -> None:
    """Make `format("weir")` known to the session (and let it prune by partition filters)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(WeirDataSource)


def _open(options: dict[str, str]) -> Table:
    uri = options.get("path")
    if not uri:
        raise ValueError('spark.read.format("weir") needs the table URI: .load(uri)')
    storage_options = {k[len("storage."):]: v for k, v in options.items() if k.startswith("storage.")}
    env, file = options.get("storageoptionsenv"), options.get("storageoptionsfile")
    if env or file:
        return Table.open(uri, storage_options=OptionsRef(env=env, file=file, literal=storage_options))
    return Table.open(uri, storage_options=storage_options or None)


class WeirDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        _freeze_imports()
        return from_arrow_schema(_open(_lower(self.options)).config.schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        _freeze_imports()
        return WeirReader(_lower(self.options), schema)


def _lower(options: Any) -> dict[str, str]:
    """Spark's data source options are case-insensitive: look them up lower-cased."""
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


@dataclass
class SlicePartition(InputPartition):
    storage: Storage
    config: TableConfig
    slice: FileSlice | None   # None: the one empty partition of an empty table
    base_only: bool

    def __init__(self, storage: Storage, config: TableConfig, slice_: FileSlice | None, base_only: bool):
        super().__init__(slice_.file_id if slice_ else None)
        self.storage, self.config, self.slice, self.base_only = storage, config, slice_, base_only


_frozen = False


def _freeze_imports() -> None:
    """Once per Python worker (planning steps and reads alike): move the objects its imports
    created (pyspark, pyarrow, numpy, lakecore: hundreds of thousands) out of the garbage
    collector's sight. A reused worker runs a full collection after every task, which would
    otherwise walk all of them each time: half the worker's CPU for a slice read. Garbage made
    after this is still collected as usual."""
    global _frozen
    if not _frozen:
        gc.collect()
        gc.freeze()
        _frozen = True


class WeirReader(DataSourceReader):
    """Spark pickles the reader into its Python workers, so it keeps options, not a Table (whose lock
    does not pickle): each planning step opens the table from the options."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = options
        self.columns = list(schema.fieldNames())
        query = options.get("querytype", "snapshot")
        if query not in ("snapshot", "read_optimized"):
            raise ValueError(f"queryType {query!r}: use snapshot or read_optimized")
        self.base_only = query == "read_optimized"
        self.partition_values: dict[str, Any] = {}

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Keep equality / IN on one partition field for slice pruning; Spark still applies every
        filter itself (they are all yielded back), so pruning can only ever read less."""
        _freeze_imports()
        config = _open(self.options).config
        for f in filters:
            if isinstance(f, EqualTo | In) and len(f.attribute) == 1:
                column = f.attribute[0]
                if column in config.partition_fields and column not in self.partition_values:
                    self.partition_values[column] = list(f.value) if isinstance(f, In) else f.value
            yield f

    def partitions(self) -> Sequence[InputPartition]:
        _freeze_imports()
        table = _open(self.options)
        timeline = full = table.timeline()
        as_of = self.options.get("asof")
        if as_of:
            timeline = TimelineStore(table.storage).as_of(full, parse_point_in_time(as_of))
        view = view_of(table.storage, timeline)
        if as_of:  # a clear error when a clean removed files that point needs
            check_readable(table.storage, full, parse_point_in_time(as_of), view)
        slices = prune(view, table.config, self.partition_values or None)
        if not slices:
            return [SlicePartition(table.storage, table.config, None, self.base_only)]
        return [SlicePartition(table.storage, table.config, s, self.base_only) for s in slices]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SlicePartition)
        _freeze_imports()
        config = partition.config
        plan = ScanPlan(slices=(partition.slice,) if partition.slice is not None else (),
                        wanted=tuple(merge_columns(config, self.columns)), columns=tuple(self.columns),
                        filter=None, meta=False, base_only=partition.base_only)
        yield from Scan(partition.storage, config, plan).to_batches()
