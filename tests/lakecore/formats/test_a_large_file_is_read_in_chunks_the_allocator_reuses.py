"""A data file of more than `READ_WHOLE_ROWS` rows (a row group's) is decoded into chunks of at most
`READ_BATCH_ROWS` rows (as pyarrow's own `read_table` does), not one array per column of the whole
file: a 4M-row base file's column is 32 MB and more, which the allocator took as fresh pages from the
kernel, zeroed, on every read (docs/benchmarks.md, fifteenth pass). Snapshot reads, merged reads and
filtered reads give the same rows in those chunks. The sizes are made small here so that a few slices
show it."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from lakecore import Table
from lakecore.read.scan import SMALL_SLICE_ROWS

BATCH = 10_000
ROWS = 3 * SMALL_SLICE_ROWS  # two buckets: each slice is read alone (`read.scan`), not with others


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("lakecore.formats.parquet.READ_BATCH_ROWS", BATCH)
    monkeypatch.setattr("lakecore.formats.parquet.READ_WHOLE_ROWS", 2 * BATCH)


def rows(keys: np.ndarray, ts: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    n = len(keys)
    return pa.table({"id": pa.array(keys, pa.int64()), "ts": pa.array(np.full(n, ts), pa.int64()),
                     "x": rng.random(n),
                     "s": pa.array(np.char.add("v", rng.integers(0, 10**6, n).astype(str)))})


def chunk_rows(table: pa.Table) -> list[int]:
    return [len(c) for col in table.columns for c in col.chunks]


def test_reads_come_in_small_chunks_with_the_same_rows(tmp_path, small_batches) -> None:
    keys = np.random.default_rng(1).permutation(ROWS * 2)[:ROWS]
    base = rows(keys, 1, seed=2)
    table = Table.create(str(tmp_path / "t"), schema=base.schema, record_key="id", ordering_field="ts",
                         buckets=2)
    table.bulk_insert(base)
    got = table.read()
    assert max(chunk_rows(got)) <= BATCH, "the base files are read in batches"
    assert got.sort_by("id").equals(base.sort_by("id"))

    # an upsert: a tenth of the keys updated, as many new; the merged read keeps the base's chunks
    updated = np.random.default_rng(3).choice(keys, ROWS // 10, replace=False)
    new = np.arange(ROWS * 2, ROWS * 2 + ROWS // 10)
    change = rows(np.concatenate([updated, new]), 2, seed=4)
    table.upsert(change)
    want = pa.concat_tables([base.filter(pc.invert(pc.is_in(base["id"], pa.array(updated)))), change])
    got = table.read()
    # the untouched base rows keep the base's chunks; the winners come from the logs (read whole)
    assert max(chunk_rows(got)) <= 2 * BATCH
    assert sum(n > BATCH for n in chunk_rows(got)) <= 2 * got.num_columns  # a log's winners per slice
    assert got.sort_by("id").equals(want.sort_by("id"))

    # a filtered read of the merged slices, and of base files alone (the row groups that may match)
    wanted = pc.field("x") < 0.25
    assert table.read(filter=wanted).sort_by("id").equals(want.filter(wanted).sort_by("id"))
    table.maintenance.compact()
    got = table.read(filter=wanted)
    assert max(chunk_rows(got)) <= BATCH
    assert got.sort_by("id").equals(want.filter(wanted).sort_by("id"))


def test_a_file_of_fewer_rows_is_read_whole(tmp_path, small_batches) -> None:
    """Up to `READ_WHOLE_ROWS` rows a file is one read (no batching cost)."""
    data = rows(np.arange(2 * BATCH), 1, seed=5)
    table = Table.create(str(tmp_path / "t"), schema=data.schema, record_key="id", buckets=1)
    table.bulk_insert(data)
    got = table.read()
    assert chunk_rows(got) == [2 * BATCH] * got.num_columns
    assert got.sort_by("id").equals(data)
