"""A data file takes the table's codec on each column it shrinks by at least a tenth and none on the
others (random numbers, hashes, bit-packed integers: the codec would cost every write and every read for
a few percent of bytes), decided from a sample spread over the rows, once per write. The decision agrees
with compressing each whole column; nested leaves are decided alone; small tables, codec `none` and
names a Parquet column path cannot spell take the codec everywhere; every value reads back exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from lakecore.formats import EncodingChoice, write_data_file
from lakecore.formats.parquet import _SAMPLE, column_encodings, dictionary_columns
from lakecore.storage.local import LocalStorage

N = 60_000
CODECS = {"zstd": "ZSTD", "lz4": "LZ4", "snappy": "SNAPPY", "gzip": "GZIP"}


def mixed(n: int = N, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    words = np.array(["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"])
    return pa.table({
        "id": pa.array(rng.permutation(4 * n)[:n], pa.int64()),                    # random: bit-packed
        "price": pa.array(rng.random(n), pa.float64()),                            # random doubles
        "note": pa.array(np.char.add("order placed by customer ",                 # text, not repeated
                                     rng.integers(0, 10 ** 9, n).astype(str))),
        "step": pa.array(np.arange(n, dtype=np.float64) // 100),                   # runs of one value
        "tags": pa.array([[w, w] for w in rng.choice(words, n).tolist()], pa.list_(pa.string())),
        "pos": pa.array([{"x": x, "label": "same label"} for x in rng.random(n).tolist()]),
    })


def chunks(path: Path) -> dict[str, tuple[str, int, int]]:
    """Per leaf column path: (codec, compressed bytes, uncompressed bytes), over the row groups."""
    meta = pq.ParquetFile(path).metadata
    out: dict[str, tuple[str, int, int]] = {}
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            ch = meta.row_group(g).column(c)
            codec, comp, raw = out.get(ch.path_in_schema, (ch.compression, 0, 0))
            assert codec == ch.compression, f"{ch.path_in_schema}: one codec in every row group"
            comp, raw = comp + ch.total_compressed_size, raw + ch.total_uncompressed_size
            out[ch.path_in_schema] = (codec, comp, raw)
    return out


@pytest.mark.parametrize("codec", list(CODECS))
def test_the_codec_goes_where_it_shrinks_a_column(tmp_path: Path, codec: str) -> None:
    table = mixed()
    write_data_file(LocalStorage(str(tmp_path)), "f.parquet", table, compression=codec)
    written = chunks(tmp_path / "f.parquet")
    assert pq.read_table(tmp_path / "f.parquet").equals(table)

    # the whole of every column compressed, encoded alike: the decision from the sample agrees with it
    dictionary = dictionary_columns(table)
    pq.write_table(table, tmp_path / "all.parquet", compression=codec, use_dictionary=dictionary,
                   column_encoding=column_encodings(table.schema, dictionary))
    whole = chunks(tmp_path / "all.parquet")
    for path, (got, comp, raw) in written.items():
        _, all_comp, all_raw = whole[path]
        saving = 1 - all_comp / all_raw
        assert got == (CODECS[codec] if saving >= 0.1 else "UNCOMPRESSED"), (path, got, round(saving, 3))
        if got == "UNCOMPRESSED":
            assert comp == raw
    assert {written[p][0] for p in ("id", "price", "pos.x")} == {"UNCOMPRESSED"}
    assert {written[p][0] for p in ("note", "step", "tags.list.element", "pos.label")} == {CODECS[codec]}


def test_small_tables_codec_none_and_dotted_names_take_the_codec_everywhere(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    small = mixed(_SAMPLE - 1)
    write_data_file(storage, "small.parquet", small, compression="zstd")
    assert {c for c, _, _ in chunks(tmp_path / "small.parquet").values()} == {"ZSTD"}

    write_data_file(storage, "none.parquet", mixed(), compression="none")
    assert {c for c, _, _ in chunks(tmp_path / "none.parquet").values()} == {"UNCOMPRESSED"}

    dotted = mixed().rename_columns(["id", "price.eur", "note", "step", "tags", "pos"])
    write_data_file(storage, "dotted.parquet", dotted, compression="zstd")
    assert {c for c, _, _ in chunks(tmp_path / "dotted.parquet").values()} == {"ZSTD"}
    assert pq.read_table(tmp_path / "dotted.parquet").equals(dotted)


def test_one_write_decides_once_and_again_for_another_codec_or_schema() -> None:
    choice = EncodingChoice()
    first = choice.of(mixed(seed=1), "zstd")
    assert choice.of(mixed(seed=2), "zstd") is first   # the write's next file: same schema, same codec
    assert choice.of(mixed(seed=2), "lz4") is not first
    assert choice.of(mixed(seed=2).drop_columns(["pos"]), "lz4").codecs.keys() == {
        "id", "price", "note", "step", "tags.list.element"}   # type: ignore[union-attr]


def test_a_tables_files_read_back_after_upserts(tmp_path: Path) -> None:
    """Through the table: a bulk insert, then an upsert into its logs; the merged read equals the rows."""
    table = mixed()
    t = Table.create(str(tmp_path / "t"), schema=table.schema, record_key="id", buckets=2)
    t.bulk_insert(table)
    changed = table.slice(0, 20_000).set_column(1, "price", pa.array(np.zeros(20_000)))
    t.upsert(changed)
    files = sorted((tmp_path / "t").glob("*.parquet")) + sorted((tmp_path / "t").glob(".*.log.*"))
    assert len(files) == 4 and all(chunks(f)["price"][0] in ("UNCOMPRESSED", "ZSTD") for f in files)
    assert any(chunks(f)["price"][0] == "UNCOMPRESSED" for f in files)   # the random prices in the base
    assert [chunks(f)["price"][0] for f in files if ".log." in f.name] == ["ZSTD", "ZSTD"]   # zeros shrink
    want = pa.concat_tables([changed, table.slice(20_000)]).sort_by("id")
    assert t.read(columns=table.column_names).sort_by("id").equals(want)
