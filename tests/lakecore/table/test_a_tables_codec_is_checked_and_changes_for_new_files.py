"""The Parquet codec of a table's data files: `Table.create` refuses one pyarrow cannot write (or brotli,
which Spark cannot read) in one line naming the allowed ones, and creates nothing; a table.json naming an
unknown codec is refused when read, with what to set. `set_compression` changes it under the table lock
while another handle writes: files written afterwards use the new codec (that handle's too, after its next
commit), files written before keep theirs, and every row reads as before."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import InvalidTableConfig, Table
from lakecore.config import CONFIG_PATH
from lakecore.table import WriteResult

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def rows(*ids: int) -> pa.Table:
    return pa.table({"id": list(ids), "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


def codecs(t: Table, written: WriteResult) -> set[str]:
    """The codecs of the files a write wrote, from their Parquet footers."""
    stats = t.commit_metadata(written.instant).write_stats
    assert stats
    footers = [pq.ParquetFile(Path(t.uri) / s.partition / s.file_name).metadata for s in stats]
    return {f.row_group(0).column(0).compression for f in footers}


@pytest.mark.parametrize("codec, says", [("lzo", "is not a Parquet codec"),
                                         ("brotli", "Spark's Parquet reader (Iceberg, Delta) cannot read")])
def test_create_refuses_a_codec_and_creates_nothing(tmp_path: Path, codec: str, says: str) -> None:
    with pytest.raises(InvalidTableConfig) as refused:
        Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", compression=codec)
    message = str(refused.value)
    assert says in message and "use one of zstd, lz4, snappy, gzip, none" in message
    assert "\n" not in message and not (tmp_path / "t").exists()


def test_a_table_json_naming_an_unknown_codec_is_refused_with_what_to_set(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    obj = json.loads(t.storage.read(CONFIG_PATH))
    t.storage.write(CONFIG_PATH, json.dumps({**obj, "compression": "lzo"}).encode())
    with pytest.raises(InvalidTableConfig, match=r"records compression 'lzo', which is not a Parquet codec; "
                       r"set its \"compression\" to one of zstd, lz4, snappy, gzip, none"):
        Table.open(t.uri)


def test_set_compression_applies_to_files_written_afterwards(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", table_type="copy_on_write",
                     buckets=1)
    other = Table.open(t.uri)   # a writer that opened the table before the change
    assert codecs(t, t.upsert(rows(1, 2))) == {"ZSTD"}

    assert t.set_compression("lz4") == "lz4"
    assert json.loads(t.storage.read(CONFIG_PATH))["compression"] == "lz4"
    assert Table.open(t.uri).config.compression == "lz4"
    with pytest.raises(InvalidTableConfig, match="'snappyy' is not a Parquet codec"):
        t.set_compression("snappyy")
    assert json.loads(t.storage.read(CONFIG_PATH))["compression"] == "lz4"   # a refusal changes nothing

    stale = other.upsert(rows(3))    # its files were written before it saw lz4
    after = other.upsert(rows(4))    # it took lz4 up at the commit before
    mine = t.upsert(rows(5))
    assert (codecs(t, stale), codecs(t, after), codecs(t, mine)) == ({"ZSTD"}, {"LZ4"}, {"LZ4"})
    assert sorted(Table.open(t.uri).read().column("id").to_pylist()) == [1, 2, 3, 4, 5]
