"""Parquet field ids: every data file Weir writes (bulk insert, log files, compaction and clustering
output) carries the stable column ids table.json keeps; a new column gets the next id; a table whose
table.json predates ids gets them deterministically without any file rewritten, and its published
Iceberg schema uses them while its older files are read through the name mapping."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.table import StaticTable

from lakecore import Table
from lakecore.config import CONFIG_PATH, META_FIELD_ID_BASE
from tests.lakecore.publish import readers

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
                    ("l", pa.list_(pa.int64())), ("v", pa.float64())])


def batch(ids: list[int]) -> pa.Table:
    return pa.table({"id": ids, "s": [{"x": i, "y": f"y{i}"} for i in ids], "l": [[i, i] for i in ids],
                     "v": [i / 2 for i in ids]}, schema=SCHEMA)


def file_ids(path: Path) -> dict[str, int]:
    """Dotted field path -> Parquet field id (-1: none) of every field of a data file, as Arrow reads
    its Parquet schema (list elements at `<list>.element`)."""
    out: dict[str, int] = {}

    def walk(prefix: str, f: pa.Field) -> None:
        name = f"{prefix}{f.name}"
        out[name] = int(f.metadata[b"PARQUET:field_id"]) if f.metadata and b"PARQUET:field_id" in f.metadata \
            else -1
        if pa.types.is_struct(f.type):
            for i in range(f.type.num_fields):
                walk(f"{name}.", f.type.field(i))
        elif pa.types.is_list(f.type):
            walk(f"{name}.", f.type.value_field)

    for f in pq.read_schema(path):
        walk("", f)
    return out


def data_files(uri: str) -> list[Path]:
    return [p for p in Path(uri).rglob("*") if p.is_file() and ".weir" not in p.parts
            and "metadata" not in p.parts and (p.suffix == ".parquet" or ".log." in p.name)]


def table_ids(uri: str) -> dict[str, int]:
    fields = json.loads(Path(uri, CONFIG_PATH).read_text())["schema"]
    return {f["name"]: f["id"] for f in fields}


def test_every_data_file_carries_the_ids_table_json_keeps(tmp_path) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=SCHEMA, record_key="id", buckets=2)
    t.bulk_insert(batch(list(range(10))))
    t.upsert(batch([1, 2, 20]))
    t.maintenance.compact()
    t.upsert(batch([3]))
    t.maintenance.cluster()
    ids = table_ids(uri)
    assert ids == {"id": 1, "s": 2, "l": 5, "v": 7}  # depth first: s.x 3, s.y 4, l.element 6
    files = data_files(uri)
    assert len(files) >= 5
    for path in files:
        got = file_ids(path)
        for name, fid in ids.items():
            assert got[name] == fid, (path.name, name)
        assert got["s.x"] == 3 and got["s.y"] == 4 and got["l.element"] == 6, path.name
        assert got["_weir_commit_time"] == META_FIELD_ID_BASE and got["_weir_op"] == META_FIELD_ID_BASE + 1

    t.add_columns([pa.field("w", pa.string())])
    assert table_ids(uri) == {**ids, "w": 8}
    assert json.loads(Path(uri, CONFIG_PATH).read_text())["last_column_id"] == 8
    t.upsert(pa.table({"id": [4], "s": [{"x": 4, "y": "y4"}], "l": [[4]], "v": [2.0], "w": ["w"]},
                      schema=pa.schema([*SCHEMA, pa.field("w", pa.string())])))
    newest = max(data_files(uri), key=lambda p: p.stat().st_mtime_ns)
    assert file_ids(newest)["w"] == 8 and file_ids(newest)["v"] == 7


def test_a_table_from_before_field_ids_gets_them_without_a_file_rewritten(tmp_path) -> None:
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=SCHEMA, record_key="id", buckets=2)
    t.bulk_insert(batch(list(range(10))))
    config = json.loads(Path(uri, CONFIG_PATH).read_text())

    def strip(fields: list[dict]) -> None:
        for f in fields:
            f.pop("id", None)
            strip(f.get("fields") or [])
            if "item" in f:
                strip([f["item"]])

    strip(config["schema"])
    del config["last_column_id"]
    Path(uri, CONFIG_PATH).write_text(json.dumps(config))
    for path in data_files(uri):  # files written before ids: rewrite them without (as Weir wrote them)
        table = pq.read_table(path)
        pq.write_table(table.cast(pa.schema([pa.field(f.name, f.type) for f in SCHEMA] +
                                            [pa.field(f.name, f.type) for f in table.schema
                                             if f.name not in SCHEMA.names])), path)
    before = {p: os.stat(p).st_mtime_ns for p in data_files(uri)}

    opened = Table.open(uri)
    assert [f.metadata[b"PARQUET:field_id"] for f in opened.config.schema] == [b"1", b"2", b"5", b"7"]
    assert Table.open(uri).config == opened.config  # the same ids every time it is read
    opened.upsert(batch([1, 30]))
    assert {p: os.stat(p).st_mtime_ns for p in before} == before, "no file rewritten"

    opened.publish("iceberg")
    iceberg = StaticTable.from_metadata(readers.iceberg_metadata(uri))
    assert {f.name: f.field_id for f in iceberg.schema().fields} == {"id": 1, "s": 2, "l": 5, "v": 7}
    got = readers.normalized(iceberg.scan().to_arrow()).sort_by("id")
    assert got.equals(readers.expected(opened.read().sort_by("id"), "iceberg"))
