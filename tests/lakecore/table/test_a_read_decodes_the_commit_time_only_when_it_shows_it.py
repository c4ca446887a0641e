"""A read of a merge-on-read table decodes the commit time only when the meta columns show it or the
filter names it, and then it is each row's own: the log's where a log row won, the base's elsewhere.
(The commit time is 8 bytes a row of every file a plain read would otherwise decode and drop.)"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from lakecore import Table
from lakecore.config import COMMIT_TIME, META_COLUMNS

SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def rows(keys: list[int], ts: int) -> pa.Table:
    return pa.table({"k": keys, "ts": [ts] * len(keys), "v": [f"{k}@{ts}" for k in keys]}, schema=SCHEMA)


def test_a_plain_read_skips_the_commit_time_and_a_meta_read_shows_each_rows_own(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="k", ordering_field="ts", buckets=1)
    first = table.bulk_insert(rows(list(range(8)), 1)).instant.requested_time
    second = table.upsert(rows([0, 3, 7, 9], 2)).instant.requested_time  # a log over the base
    table = Table.open(str(tmp_path / "t"))

    plain = table.scan()
    assert COMMIT_TIME not in plain.plan.wanted
    assert plain.to_arrow().sort_by("k").to_pylist() == \
        rows([0], 2).to_pylist() + rows([1, 2], 1).to_pylist() + rows([3], 2).to_pylist() + \
        rows([4, 5, 6], 1).to_pylist() + rows([7, 9], 2).to_pylist()

    expected = {k: second if k in (0, 3, 7, 9) else first for k in range(10) if k != 8}
    for read in (table.read(with_meta=True), table.read(columns=["k", COMMIT_TIME])):
        got = read.sort_by("k")
        assert dict(zip(got["k"].to_pylist(), got[COMMIT_TIME].to_pylist(), strict=True)) == expected

    filtered = table.read(filter=pc.field(COMMIT_TIME) == pc.scalar(int(second)))
    assert sorted(filtered["k"].to_pylist()) == [0, 3, 7, 9]
    assert filtered.column_names == SCHEMA.names


def test_with_meta_shows_the_meta_columns_beside_the_columns_asked_for(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="k", ordering_field="ts", buckets=1)
    empty = table.read(columns=["v"], with_meta=True)
    table.upsert(rows([1, 2], 1))
    for read in (empty, table.read(columns=["v"], with_meta=True),
                 table.scan(columns=["v"], with_meta=True).to_arrow()):
        assert read.column_names == [*META_COLUMNS, "v"]
    assert table.read(columns=["v", COMMIT_TIME], with_meta=True).column_names == \
        [*(m for m in META_COLUMNS if m != COMMIT_TIME), "v", COMMIT_TIME]
    assert table.read(columns=["k", COMMIT_TIME]).column_names == ["k", COMMIT_TIME]
