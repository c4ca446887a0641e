"""The rows of Iceberg position-delete files (`file_path`, `pos`, sorted by both as the spec asks):
written from a plan's files, and merged when a publish folds (one file per partition from many).

Readers open every delete file a snapshot lists (pyiceberg reads each once per scan), so a snapshot
whose incremental publishes left one small delete file per changed data file reads much slower than
one with a file per partition: a fold merges each partition's into one. A merged file names no data
file of its own (`referenced_data_file` is null), so no later publish can drop it with a group; its
rows of data files no longer listed hide nothing (a data file's path is never reused) and are left
out at the next merge of that partition when their group was rewritten, or at the next full rebuild.
Pure but for `read` and `write`, which go through the storage they are given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.formats import read_files, write_file
from lakecore.publish import iceberg_avro as avro
from lakecore.publish.plan import PlannedFile
from lakecore.storage import Storage

SCHEMA = pa.schema([
    pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(avro.FILE_PATH_ID)}),
    pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(avro.POS_ID)}),
])


def rows_of(files: Sequence[PlannedFile], uri: Callable[[str], str]) -> pa.Table:
    """The rows `files` hide, each named by `uri(path)`."""
    files = sorted(files, key=lambda f: f.path)
    paths = pa.array([uri(f.path) for f in files], pa.string())
    which = np.repeat(np.arange(len(files)), [len(f.hidden) for f in files])
    positions = np.concatenate([f.hidden for f in files])
    return pa.Table.from_arrays([paths.take(pa.array(which)), pa.array(positions)], schema=SCHEMA)


def merged(tables: Sequence[pa.Table], keep: Callable[[str], bool]) -> pa.Table:
    """The rows of several delete files as one file's: each row once, those of data files `keep`
    refuses left out, sorted."""
    rows = pa.concat_tables([t.select(["file_path", "pos"]).cast(SCHEMA) for t in tables])
    paths = pc.unique(rows.column("file_path")).to_pylist()
    kept = [p for p in paths if keep(p)]
    if len(kept) < len(paths):
        rows = rows.filter(pc.is_in(rows.column("file_path"), value_set=pa.array(kept, pa.string())))
    rows = rows.group_by(["file_path", "pos"]).aggregate([]).sort_by([("file_path", "ascending"),
                                                                    ("pos", "ascending")])
    return pa.Table.from_arrays([rows.column("file_path"), rows.column("pos")], schema=SCHEMA)


def read(storage: Storage, paths: Sequence[str]) -> list[pa.Table]:
    return read_files(storage, paths, ["file_path", "pos"], small=True)


def write(storage: Storage, path: str, rows: pa.Table) -> int:
    return write_file(storage, path, rows, compression="zstd")
