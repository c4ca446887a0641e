"""Parquet reads and writes of data files through a Storage's Arrow filesystem.

Owns codec and row-group choices and parallel reads of many files. Log files are Parquet too (with a
`_weir_op` column): columnar, compressed, and read by the same vectorized path as base files.

Failures: bytes that do not decode (a truncated file, a garbled footer or page) raise DamagedFile
naming the file and the instant that wrote it, never retryable; an OSError of the storage itself
(a full disk, a refusal) raises the storage's error (`storage.failures`), and a failed write removes
its partial file. `read_footer` reads a file's footer only (one read): what `weir table check` does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Protocol, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lakecore.errors import DamagedFile
from lakecore.formats.stats import FileStats, PartStats, footer_stats, written_stats
from lakecore.layout import parse_data_file_name
from lakecore.storage import Storage
from lakecore.storage.failures import PASS_THROUGH, storage_error, translated

T = TypeVar("T")
A = TypeVar("A")

ROW_GROUP_ROWS = 1 << 20  # rows per row group of a data file unless told
# A file of more rows than a row group is read in chunks of READ_BATCH_ROWS rows (as pyarrow's own
# `read_table`): each column's buffers stay small enough for the allocator to reuse freed memory,
# where a whole file's column (4M rows: 32 MB and more) took fresh pages from the kernel on every
# read, zeroed first. Up to a row group's rows (8 MB for 8-byte values) a whole-file read measured
# the same in a warm process and a little faster in a fresh one (docs/benchmarks.md, fifteenth pass).
READ_WHOLE_ROWS = ROW_GROUP_ROWS
READ_BATCH_ROWS = 1 << 17
_SAMPLE = 16_384
_MIN_SAVING = 0.10  # a codec that saves less of a column's bytes is left off it (`column_codecs`)
_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="weir-io")


@dataclass(frozen=True)
class Encodings:
    """How one file's columns are encoded: the dictionary-encoded columns, and the codec of each leaf
    column (its Parquet path), or one codec for all of them."""

    dictionary: list[str]
    codecs: str | dict[str, str]


class RowSource(Protocol):
    """The rows a data file is written from, taken a row group at a time (`slice`): a pa.Table, or a
    file group's rows gathered from a write's input as each row group is written, never held whole
    (`write.file_writer`). `schema` is the schema of every slice."""

    @property
    def schema(self) -> pa.Schema: ...

    @property
    def num_rows(self) -> int: ...

    def slice(self, offset: int = 0, length: int | None = None) -> pa.Table: ...


class EncodingChoice:
    """The encodings of one write's files (`choose_encodings`), decided once from its first file.

    The files of one write are hash partitions of the same batch, so they repeat values alike; a
    write of many small files (a streaming upsert into 16 buckets) would otherwise spend as long
    deciding as writing. Pickles (each task process decides for itself); two threads deciding at
    once is harmless (either answer is a fine choice)."""

    def __init__(self) -> None:
        self.decided: tuple[pa.Schema, str, Encodings] | None = None

    def of(self, table: RowSource, compression: str) -> Encodings:
        decided = self.decided
        if decided is None or decided[1] != compression or not decided[0].equals(table.schema):
            decided = self.decided = (table.schema, compression, choose_encodings(table, compression))
        return decided[2]


def write_file(storage: Storage, path: str, table: pa.Table, *, compression: str,
               row_group_size: int | None = None, encodings: EncodingChoice | None = None,
               ids: pa.Schema | None = None) -> int:
    """Write `table` to `path`, durably (storage.sync) before returning: every data file of an instant
    is durable before its completed instant file is created. Returns the file size in bytes.
    `row_group_size` (rows): smaller row
    groups let readers prune by their min/max statistics (clustering sets it). `encodings`: share
    the choice of encodings (`choose_encodings`) among the files of one write (default: per file). `ids`:
    a schema whose fields carry Parquet field ids (`config.FIELD_ID`): each column of `table` it names
    is written with its id."""
    return _write(storage, path, table, compression=compression, row_group_size=row_group_size,
                  encodings=encodings, ids=ids)[0]


def write_data_file(storage: Storage, path: str, table: RowSource, *, compression: str,
                    row_group_size: int | None = None, encodings: EncodingChoice | None = None,
                    ids: pa.Schema | None = None, sync: Callable[[str], None] | None = None,
                    early_sync: Callable[[str], None] | None = None) -> tuple[int, FileStats]:
    """`write_file`, and the written file's column statistics for its write stat (`written_stats`:
    from the footer the writer built, with no second pass over `table` where it serves). `sync`
    makes the file durable (default `storage.sync`, before this returns; a write's tasks hand it to
    `write.syncs.BackgroundSyncs`); `early_sync`, when given, is called after each row group but the
    last, to start making what is written durable while the rest is encoded (the tasks' background
    syncs: the final sync then waits for the last row group only). `table` may be any RowSource:
    one that is not a pa.Table has its statistics taken a row group at a time (`PartStats`)."""
    parts = None if isinstance(table, pa.Table) else PartStats()
    size, metadata = _write(storage, path, table, compression=compression, row_group_size=row_group_size,
                            encodings=encodings, ids=ids, sync=sync, early_sync=early_sync,
                            seen=None if parts is None else parts.add)
    if parts is None:
        return size, written_stats(table, metadata)
    return size, parts.of(metadata, table.schema)


def _write(storage: Storage, path: str, table: RowSource, *, compression: str, row_group_size: int | None,
           encodings: EncodingChoice | None, ids: pa.Schema | None,
           sync: Callable[[str], None] | None = None, early_sync: Callable[[str], None] | None = None,
           seen: Callable[[pa.Table], None] | None = None) -> tuple[int, pq.FileMetaData]:
    schema = table.schema if ids is None else ids_schema(table.schema, ids)
    fs, root = storage.arrow()
    full = f"{root}/{path}"
    parent = full.rsplit("/", 1)[0]
    footer: list[pq.FileMetaData] = []
    try:
        with translated("writing", full):
            fs.create_dir(parent, recursive=True)
            with fs.open_output_stream(full) as out, _unmasked():
                chosen = (encodings or EncodingChoice()).of(table, compression)
                step = row_group_size or ROW_GROUP_ROWS
                with pq.ParquetWriter(out, schema, compression=chosen.codecs,
                                      use_dictionary=chosen.dictionary,
                                      column_encoding=column_encodings(schema, chosen.dictionary),
                                      metadata_collector=footer) as writer:
                    for start in range(0, max(table.num_rows, 1), step):  # one row group each
                        part = table.slice(start, step)
                        writer.write_table(part if ids is None else with_schema(part, schema),
                                           row_group_size=step)
                        if seen is not None:
                            seen(part)
                        del part  # before the next slice: its memory serves that one
                        if early_sync is not None and start + step < table.num_rows:
                            early_sync(path)
                size = out.tell()
        (sync or storage.sync)(path)
    except BaseException:
        with suppress(Exception):  # no partial file is left (a full disk); the first error is the one
            storage.delete(path)
        raise
    return int(size), footer[0]


@contextmanager
def _unmasked() -> Iterator[None]:
    """pyarrow's writer, failing (a full disk), still hands its footer to the metadata collector on
    the way out, which raises a RuntimeError in place of the OSError that says what went wrong."""
    try:
        yield
    except RuntimeError as exc:
        if isinstance(exc.__context__, OSError):
            raise exc.__context__ from None
        raise


def ids_schema(schema: pa.Schema, ids: pa.Schema) -> pa.Schema:
    """`schema` with the field metadata (ids) of the same-named fields of `ids`."""
    fields = []
    for f in schema:
        ref = ids.field(f.name) if f.name in ids.names else None
        fields.append(ref.with_nullable(f.nullable) if ref is not None and ref.type == f.type else f)
    return pa.schema(fields, metadata=schema.metadata)


def with_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` under `schema` (the same columns, other field metadata): no copy where it can be."""
    try:
        return pa.Table.from_arrays(table.columns, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return table.cast(schema)


def choose_encodings(table: RowSource, compression: str) -> Encodings:
    """The encodings of a file of `table`'s rows with the table's codec `compression`: dictionaries
    where values repeat (`dictionary_columns`), and the codec on each column it shrinks (`column_codecs`)."""
    dictionary = dictionary_columns(table)
    return Encodings(dictionary, column_codecs(table, compression, dictionary))


def column_codecs(table: RowSource, compression: str, dictionary: Sequence[str]) -> str | dict[str, str]:
    """The codec of each leaf column: `compression` where it saves at least `_MIN_SAVING` of the
    column's encoded bytes in a sample of the rows (4 slices spread over them, encoded as the file
    will be), none where it does not. Random numbers, hashes, ids and already bit-packed integers gain
    a few percent from zstd and cost its time on every write and every read of every reader (1M
    random doubles: 8.0 MB plain, 7.5 MB zstd, written 2.3x slower; the peers' 1M-row file reads 14%
    faster without it on such columns, docs/benchmarks.md); strings and repeated values keep it.
    Tables of fewer than `_SAMPLE` rows (the CPU at stake is small) and names a Parquet column path
    cannot spell (a dot in a name) take `compression` on every column."""
    n = table.num_rows
    if compression == "none" or n < _SAMPLE or _dotted(table.schema):
        return compression
    step = _SAMPLE // 4
    sample = pa.concat_tables([table.slice(i * (n - step) // 3, step) for i in range(4)])
    footer: list[pq.FileMetaData] = []
    pq.write_table(sample, pa.BufferOutputStream(), compression=compression, use_dictionary=list(dictionary),
                   column_encoding=column_encodings(sample.schema, dictionary), metadata_collector=footer)
    group = footer[0].row_group(0)
    codecs = {}
    for i in range(group.num_columns):
        chunk = group.column(i)
        saves = chunk.total_compressed_size <= (1 - _MIN_SAVING) * chunk.total_uncompressed_size
        codecs[chunk.path_in_schema] = compression if saves else "none"
    return codecs


def _dotted(schema: pa.Schema) -> bool:
    """Whether a field name, at any depth, holds a dot (a Parquet column path would split it)."""
    def names(t: pa.DataType) -> Iterator[str]:
        for f in (t.field(i) for i in range(t.num_fields)):
            yield f.name
            yield from names(f.type)
    return any("." in n for n in names(pa.struct(list(schema))))


def dictionary_columns(table: RowSource) -> list[str]:
    """Columns worth dictionary-encoding: those whose leading sample repeats values.

    Parquet writers try a dictionary for every column and fall back to plain encoding once it
    overflows; for high-cardinality columns that attempt is pure cost, and it is paid again in every
    file, so bucketed tables (many smaller files) would pay it many times over.
    """
    sample = table.slice(0, _SAMPLE)
    out = []
    for name, col in zip(sample.column_names, sample.columns, strict=True):
        if pa.types.is_nested(col.type) or len(col) == 0:
            continue
        if pc.count_distinct(col).as_py() <= len(col) // 2:
            out.append(name)
    return out


def column_encodings(schema: pa.Schema, dictionary_encoded: Sequence[str]) -> dict[str, str]:
    """DELTA_BINARY_PACKED (the differences between neighbouring values, bit-packed) for each top-level
    integer, date, time and timestamp column that is not dictionary-encoded, in place of PLAIN.
    Measured (docs/benchmarks.md): on the peers' integers with zstd, writes and reads faster and files
    smaller, with lz4 the same speed and smaller files; on event times far more (zstd: writes 46% and
    reads 58% faster). Every reader Weir tests reads it (pyarrow, Spark, DuckDB, polars, delta-rs,
    daft). Floats stay PLAIN: BYTE_STREAM_SPLIT would compress them better, but Spark's vectorized
    Parquet reader (Spark 4.1, the Delta path) refuses it ("Unsupported encoding"). Strings stay
    PLAIN too: DELTA_LENGTH_BYTE_ARRAY made zstd'd string columns 10% smaller, but pyarrow cannot
    read such a column as a dictionary (`read_dictionary`; pyiceberg does so for delete files:
    "DecodeArrow of DictAccumulator for DeltaLengthByteArrayDecoder"), and the 16M-row bulk insert
    was no faster measurably (fourteenth pass)."""
    skip = set(dictionary_encoded)
    return {f.name: "DELTA_BINARY_PACKED" for f in schema if f.name not in skip and _delta_packable(f.type)}


def _delta_packable(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t)


@dataclass(frozen=True)
class Footer:
    """What a data file's footer says."""

    rows: int
    schema: pa.Schema


@dataclass(frozen=True)
class RowGroupFilter:
    """Read only the row groups whose footer statistics say a row may satisfy `filter` (bound to
    `schema`, which may hold columns a file lacks: they read as null)."""

    filter: pc.Expression
    schema: pa.Schema


def read_file(storage: Storage, path: str, columns: Sequence[str] | None = None, *,
              where: RowGroupFilter | None = None, small: bool = False) -> pa.Table:
    """Read a data file, keeping only the wanted columns the file actually has (and with `where`,
    only the row groups that may hold a matching row: the caller still filters the rows). `small`:
    a file of few rows, one of many read concurrently: decoded on the calling thread, and on local
    storage without pre-buffering (for a file of a few kilobytes both cost more than they save)."""
    with decoding(storage, path):
        if where is None:
            pf = _open(storage, path, small=small)
            groups = None
        else:
            # imported here, not at the top: it imports pandas (~55 MB), which only a filtered read needs
            import pyarrow.dataset as ds

            fs, root = storage.arrow()
            fragment = ds.ParquetFileFormat().make_fragment(f"{root}/{path}", filesystem=fs)
            parts = fragment.split_by_row_group(where.filter, schema=where.schema)
            groups = [rg.id for part in parts for rg in part.row_groups]
            pf = pq.ParquetFile(f"{root}/{path}", filesystem=fs, metadata=fragment.metadata)
        names = pf.schema_arrow.names
        cols = [c for c in columns if c in names] if columns is not None else None
        if groups is not None and len(groups) == pf.metadata.num_row_groups:
            groups = None
        if small or pf.metadata.num_rows <= READ_WHOLE_ROWS:
            if groups is None:
                return pf.read(columns=cols, use_threads=not small)
            return pf.read_row_groups(groups, columns=cols, use_threads=not small)
        batches = list(pf.iter_batches(batch_size=READ_BATCH_ROWS, row_groups=groups, columns=cols))
        if not batches:
            return pf.read_row_groups([], columns=cols)
        return pa.Table.from_batches(batches)


def read_footer(storage: Storage, path: str) -> Footer:
    """The file's row count and schema, from its footer alone."""
    with decoding(storage, path):
        pf = _open(storage, path)
        return Footer(pf.metadata.num_rows, pf.schema_arrow)


def read_footer_stats(storage: Storage, path: str) -> FileStats:
    """Column statistics of a file from its footer (one read): for files written before Weir recorded
    them in the write stats."""
    with decoding(storage, path):
        pf = _open(storage, path)
        return footer_stats(pf.metadata, pf.schema_arrow)


def read_schema(storage: Storage, path: str) -> pa.Schema:
    return read_footer(storage, path).schema


def _open(storage: Storage, path: str, *, small: bool = False) -> pq.ParquetFile:
    fs, root = storage.arrow()
    # pre-buffering coalesces a file's column reads into one request: worth it where a request is remote
    buffer = not (small and isinstance(fs, pafs.LocalFileSystem))
    return pq.ParquetFile(f"{root}/{path}", filesystem=fs, pre_buffer=buffer)


@contextmanager
def decoding(storage: Storage, path: str) -> Iterator[None]:
    """Reads of `path` inside: undecodable bytes raise DamagedFile, storage failures StorageError."""
    try:
        yield
    except PASS_THROUGH:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        if isinstance(exc, OSError) and exc.errno is not None:  # the storage failed, not the bytes
            raise storage_error(exc, "reading", f"{storage.uri}/{path}") from exc
        raise damaged(storage, path, exc) from exc


def damaged(storage: Storage, path: str, exc: BaseException) -> DamagedFile:
    """The error for a data file whose bytes do not decode as Parquet."""
    name = parse_data_file_name(path.rsplit("/", 1)[-1])
    instant = name.instant_time if name is not None else None
    by = f" (written by instant {instant})" if instant else ""
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return DamagedFile(
        f"data file {path}{by} of table {storage.uri} is damaged: {reason}. Retrying does not help: "
        f"restore it from a backup; `weir table check {storage.uri}` lists every damaged file with "
        "its remedy", path=path, instant=instant)


def map_files(fn: Callable[[A], T], paths: Sequence[A]) -> list[T]:
    """`fn` over many files concurrently (I/O bound: footers, whole files, writes)."""
    if len(paths) <= 1:
        return [fn(p) for p in paths]
    return list(_pool.map(fn, paths))


def read_files(storage: Storage, paths: Sequence[str], columns: Sequence[str] | None = None, *,
               small: bool = False) -> list[pa.Table]:
    """Read several files concurrently (Arrow releases the GIL while decoding); `small`: see read_file."""
    return map_files(lambda p: read_file(storage, p, columns, small=small), paths)
