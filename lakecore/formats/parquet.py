"""Parquet reads and writes of data files through a Storage's Arrow filesystem.

Owns codec and row-group choices and parallel reads of many files. Log files are Parquet too (with a
`_weir_op` column): columnar, compressed, and read by the same vectorized path as base files.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakecore.storage import Storage

_ROW_GROUP = 1 << 20
_SAMPLE = 16_384
_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="weir-io")


class DictionaryChoice:
    """The dictionary-encoded columns of one write's files, decided once from its first file.

    The files of one write are hash partitions of the same batch, so they repeat values alike; a
    write of many small files (a streaming upsert into 16 buckets) would otherwise spend as long
    deciding as writing. Pickles (each task process decides for itself); two threads deciding at
    once is harmless (either answer is a fine choice)."""

    def __init__(self) -> None:
        self.columns: list[str] | None = None

    def of(self, table: pa.Table) -> list[str]:
        if self.columns is None or not set(self.columns) <= set(table.column_names):
            self.columns = dictionary_columns(table)
        return self.columns


def write_file(storage: Storage, path: str, table: pa.Table, *, compression: str,
               row_group_size: int | None = None, dictionary: DictionaryChoice | None = None) -> int:
    """Write `table` to `path`, durably (storage.sync) before returning: every data file of an instant
    is durable before its completed instant file is created. Returns the file size in bytes.
    `row_group_size` (rows): smaller row
    groups let readers prune by their min/max statistics (clustering sets it). `dictionary`: share
    the choice of dictionary-encoded columns among the files of one write (default: per file)."""
    fs, root = storage.arrow()
    full = f"{root}/{path}"
    parent = full.rsplit("/", 1)[0]
    fs.create_dir(parent, recursive=True)
    with fs.open_output_stream(full) as out:
        pq.write_table(table, out, compression=compression, row_group_size=row_group_size or _ROW_GROUP,
                       use_dictionary=(dictionary or DictionaryChoice()).of(table))
        size = out.tell()
    storage.sync(path)
    return int(size)


def dictionary_columns(table: pa.Table) -> list[str]:
    """Columns worth dictionary-encoding: those whose leading sample repeats values.

    Parquet writers try a dictionary for every column and fall back to plain encoding once it
    overflows; for high-cardinality columns that attempt is pure cost, and it is paid again in every
    file, so bucketed tables (many smaller files) would pay it many times over.
    """
    sample = table.slice(0, _SAMPLE)
    out = []
    for name, col in zip(table.column_names, sample.columns, strict=True):
        if pa.types.is_nested(col.type) or len(col) == 0:
            continue
        if pc.count_distinct(col).as_py() <= len(col) // 2:
            out.append(name)
    return out


def read_file(storage: Storage, path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """Read a data file, keeping only the wanted columns the file actually has."""
    fs, root = storage.arrow()
    pf = pq.ParquetFile(f"{root}/{path}", filesystem=fs)
    names = pf.schema_arrow.names
    cols = [c for c in columns if c in names] if columns is not None else None
    return pf.read(columns=cols, use_threads=True)


def read_schema(storage: Storage, path: str) -> pa.Schema:
    fs, root = storage.arrow()
    return pq.read_schema(f"{root}/{path}", filesystem=fs)


def read_files(storage: Storage, paths: Sequence[str], columns: Sequence[str] | None = None
               ) -> list[pa.Table]:
    """Read several files concurrently (Arrow releases the GIL while decoding)."""
    if len(paths) <= 1:
        return [read_file(storage, p, columns) for p in paths]
    return list(_pool.map(lambda p: read_file(storage, p, columns), paths))
