"""`weir table create --compression` records the Parquet codec of the table's files; `weir table
set-compression` changes it for the files written from then on (those before keep theirs); a codec weir does
not write, or one Spark cannot read, is refused in one line naming the allowed ones, and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from tests.lakecore.cli.test_weir_table_commands import upsert_json, weir


def codec(uri: str) -> str:
    return str(json.loads(weir("table", "describe", uri, "--json")[1])["config"]["compression"])


def footers(uri: str) -> list[str]:
    return [pq.ParquetFile(f).metadata.row_group(0).column(0).compression
            for f in sorted(Path(uri).glob("*.parquet"), key=lambda f: f.stat().st_mtime_ns)]


def test_create_with_a_codec_then_change_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    code, out = weir("table", "create", uri, "--schema", "id:int64,v:string", "--record-key", "id",
                     "--type", "copy_on_write", "--buckets", "1", "--compression", "snappy")
    assert code == 0 and "snappy" in out, out
    assert codec(uri) == "snappy"
    upsert_json(tmp_path, uri, "a", '{"id": 1, "v": "a"}\n')

    code, out = weir("table", "set-compression", uri, "lz4", "--json")
    assert code == 0, out
    assert json.loads(out) == {"before": "snappy", "after": "lz4"} and codec(uri) == "lz4"
    upsert_json(tmp_path, uri, "b", '{"id": 2, "v": "b"}\n')
    assert footers(uri) == ["SNAPPY", "LZ4"]
    code, out = weir("table", "set-compression", uri, "zstd")
    assert code == 0 and " ".join(out.split()).startswith(f"compression of {uri}: lz4 -> zstd"), out


def test_a_codec_that_is_not_offered_is_refused_in_one_line(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    code, out = weir("table", "create", uri, "--schema", "id:int64", "--record-key", "id", "--compression",
                     "lzo")
    assert code == 1 and "'lzo' is not a Parquet codec; use one of zstd, lz4, snappy, gzip, none" in out, out
    assert len(out.strip().splitlines()) == 1 and not Path(uri).exists()
    assert weir("table", "create", uri, "--schema", "id:int64", "--record-key", "id")[0] == 0
    code, out = weir("table", "set-compression", uri, "brotli")
    assert code == 1 and "Spark's Parquet reader (Iceberg, Delta) cannot read it; use one of" in out, out
    assert len(out.strip().splitlines()) == 1 and codec(uri) == "zstd"
