"""After a write adds a nullable column (`evolve_schema=True`), files written before it read that column
as null in every query: snapshot (slices whose base predates it, with and without logs),
read-optimized, time travel to before and after it, and incremental reads — also after compaction
and clustering rewrote some of those files."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore import FileOptions, Table, WriterOptions

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
EVOLVE = WriterOptions(files=FileOptions(evolve_schema=True))


def rows(ids: list[int], v: str, **extra: list) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{v}{i}" for i in ids],
                     **{k: pa.array(x) for k, x in extra.items()}})


def by_id(table: pa.Table) -> dict[int, dict]:
    return {r["id"]: {k: x for k, x in r.items() if not k.startswith("_weir_") or k == "_weir_op"}
            for r in table.to_pylist()}


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_every_query_reads_a_column_older_files_lack_as_null(tmp_path, table_type):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=2, table_type=table_type,
                     options=EVOLVE)
    first = t.upsert(rows([1, 2, 3, 4], "a")).instant
    if table_type == "merge_on_read":
        t.maintenance.compact()                                    # base files without the column
        t.upsert(rows([4], "b"))                       # a log on an old base, without it either
    added = t.upsert(rows([1], "c", score=[0.5])).instant
    assert t.schema.names == ["id", "v", "score"]

    expected = {1: {"id": 1, "v": "c1", "score": 0.5}, 2: {"id": 2, "v": "a2", "score": None},
                3: {"id": 3, "v": "a3", "score": None},
                4: {"id": 4, "v": "b4" if table_type == "merge_on_read" else "a4", "score": None}}
    assert by_id(t.read()) == expected
    assert by_id(t.read(columns=["id", "score"])) == {k: {"id": k, "score": r["score"]}
                                                      for k, r in expected.items()}
    assert by_id(t.read(as_of=first.requested_time)) == {i: {"id": i, "v": f"a{i}", "score": None}
                                                         for i in (1, 2, 3, 4)}
    assert by_id(t.read(as_of=added.requested_time)) == expected
    base_only = by_id(t.read(query="read_optimized"))
    assert all(r["score"] is None for k, r in base_only.items() if k != 1)
    changes = by_id(t.read_changes(first.requested_time))
    assert {k: r["score"] for k, r in changes.items()} == {1: 0.5, **({4: None} if table_type ==
                                                                      "merge_on_read" else {})}

    t.maintenance.cluster()                                        # rewrites old files with the column
    assert by_id(t.read()) == expected
    assert by_id(t.read(query="read_optimized")) == expected
    assert by_id(t.read(as_of=first.requested_time)) == {i: {"id": i, "v": f"a{i}", "score": None}
                                                         for i in (1, 2, 3, 4)}
