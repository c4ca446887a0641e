"""A read merges the small file slices of a partition together, in one merge per run of them (a small
slice's merge is mostly fixed cost), and returns exactly what merging each slice alone returns: for
every query shape, for slices of logs only, after compaction, when the slices' files differ in columns
(an added column), and when something wrote a key into two file groups of a partition (then each
slice is merged alone, as a read always did, and the key shows in both)."""

from __future__ import annotations

from itertools import pairwise

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from lakecore.read import scan as scan_module
from lakecore.read import slices as slices_module
from lakecore.read.scan import read_units
from tests.lakecore.table.scan_tables import SCHEMA, merge_on_read_table, part_rows


def sorted_rows(table: pa.Table) -> pa.Table:
    return table.sort_by([(c, "ascending") for c in table.column_names])


def slice_by_slice(monkeypatch: pytest.MonkeyPatch, read):  # type: ignore[no-untyped-def]
    """What `read()` returns with every slice merged alone."""
    with monkeypatch.context() as patch:
        patch.setattr(scan_module, "SMALL_SLICE_ROWS", 0)
        return read()


class CountedMerges:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        merge_slice = slices_module.merge_slice

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            self.calls += 1
            return merge_slice(*args, **kwargs)

        monkeypatch.setattr(slices_module, "merge_slice", counted)


def test_a_partitions_small_slices_merge_once_and_read_as_slice_by_slice(tmp_path, monkeypatch):
    uri = str(tmp_path / "t")
    table = merge_on_read_table(uri, buckets=6, rows=3_000)
    queries = {
        "all": lambda: table.read(),
        "columns": lambda: table.read(columns=["id", "value"]),
        "filter": lambda: table.read(filter=pc.field("value") > 400),
        "partition": lambda: table.read(partitions={"part": "b"}),
        "as of the upsert": lambda: table.read(as_of=table.timeline().completed[1].completion_time),
    }
    for name, query in queries.items():
        alone = slice_by_slice(monkeypatch, query)
        together = query()
        assert alone.num_rows > 0, name
        assert sorted_rows(together).equals(sorted_rows(alone)), name
        assert together.schema.equals(alone.schema), name
    merges = CountedMerges(monkeypatch)
    scan = table.scan()
    units = read_units(scan.plan)
    merged = [fs for fs in scan.slices if fs.base is not None and len(fs.files) > 1]
    assert len(merged) == 12  # 2 partitions x 6 buckets, each a base and logs
    assert len([fs for fs in scan.slices if fs.base is None]) == 6  # a partition of logs only
    assert [len(unit) for unit in units] == [6, 6, 6]  # each partition's slices in one unit
    scan.to_arrow()
    assert merges.calls == len(units)


def test_slices_with_a_base_and_slices_of_logs_only_go_in_separate_units(tmp_path, monkeypatch):
    """A partition where some file groups have a base and others only logs (a later insert reached new
    buckets): each kind is merged in units of its own, and the read is the same as slice by slice."""
    uri = str(tmp_path / "t")
    table = Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts",
                         partition_fields=["part"], buckets=8)
    table.bulk_insert(part_rows(range(0, 6), 1, "a"))      # a few keys: bases in some buckets only
    table.insert(part_rows(range(100, 400), 2, "a"))       # the rest get logs only
    table.upsert(part_rows(range(0, 400, 4), 3, "a"))
    table.delete(pa.table({"id": pa.array(range(1, 400, 9), pa.int64()), "part": pa.array(["a"] * 45)}))
    scan = table.scan()
    kinds = {fs.base is None for fs in scan.slices}
    assert kinds == {True, False}
    units = read_units(scan.plan)
    assert all(len({fs.base is None for fs in unit}) == 1 for unit in units)
    # a unit is a run of slices in slice order, so it ends where the kind changes, and only there
    logs_only = [fs.base is None for fs in scan.slices]
    changes = sum(a != b for a, b in pairwise(logs_only))
    assert len(units) == changes + 1 < len(scan.slices)
    alone = slice_by_slice(monkeypatch, table.read)
    assert alone.num_rows > 0
    assert sorted_rows(table.read()).equals(sorted_rows(alone))


def test_compacted_small_slices_read_together_as_slice_by_slice(tmp_path, monkeypatch):
    """After compaction every slice is one base file (deleted keys kept as tombstones, which the read
    drops); they are read together too."""
    uri = str(tmp_path / "t")
    table = merge_on_read_table(uri, buckets=6, rows=3_000)
    table.maintenance.compact()
    scan = table.scan()
    alone_only = [fs for fs in scan.slices if fs.base is not None and len(fs.files) == 1]
    assert len(alone_only) == len(scan.slices) == 18  # 3 partitions x 6 buckets
    assert any(fs.base.stats["columns"]["_weir_op"]["max"] == 1 for fs in alone_only)  # tombstones
    for query in (table.read, lambda: table.read(columns=["id", "name"]),
                  lambda: table.read(filter=pc.field("id") < 100)):
        alone = slice_by_slice(monkeypatch, query)
        assert alone.num_rows > 0
        assert sorted_rows(query()).equals(sorted_rows(alone))
    assert len(read_units(scan.plan)) < len(scan.slices) - 10
    # a filtered scan reads a base file alone: its row groups are skipped by the filter
    filtered = table.scan(filter=pc.field("id") < 100)
    assert all(len(unit) == 1 for unit in read_units(filtered.plan))


def base_ids(uri: str, table: Table, part: str) -> list[list[int]]:
    """The ids in each base file of partition `part` (a file group's keys), slice by slice."""
    slices = [fs for fs in table.scan(partitions={"part": part}).slices if fs.base is not None]
    return [pq.read_table(f"{uri}/{fs.base.path}", columns=["id"]).column("id").to_pylist() for fs in slices]


def test_slices_whose_files_differ_in_columns_read_as_slice_by_slice(tmp_path, monkeypatch):
    uri = str(tmp_path / "t")
    table = merge_on_read_table(uri, buckets=4, rows=1_000)
    first, second = base_ids(uri, table, "a")[:2]
    table.upsert(part_rows(first[:2], 9, "a"))   # the first file group's newest log lacks the new column
    table.add_columns([pa.field("note", pa.string())])
    # the second's newest log, at the same depth of its slice, has it
    table.upsert(part_rows(second[:2], 9, "a").append_column("note", pa.array(["x", "y"])))
    alone = slice_by_slice(monkeypatch, table.read)
    paths: list[str] = []
    read_files = slices_module.read_files

    def recorded(storage, names, *args, **kwargs):  # type: ignore[no-untyped-def]
        paths.extend(names)
        return read_files(storage, names, *args, **kwargs)

    monkeypatch.setattr(slices_module, "read_files", recorded)
    together = table.read()
    assert sorted_rows(together).equals(sorted_rows(alone))
    assert pc.count(together.column("note")).as_py() == 2
    assert sorted(paths) == sorted(f.path for fs in table.scan().slices for f in fs.files)  # each once


def test_a_key_written_into_two_file_groups_shows_in_both(tmp_path, monkeypatch):
    """A key outside its file group (a file written around Weir's routing): each slice is still merged
    alone, as the read always did, rather than the two file groups' rows folded into one."""
    uri = str(tmp_path / "t")
    table = merge_on_read_table(uri, buckets=4, rows=1_000)
    slices = [fs for fs in table.scan(partitions={"part": "a"}).slices if fs.base is not None]
    first = pq.read_table(f"{uri}/{slices[0].base.path}")
    # a key of the first file group that its logs update (every third id of "a") and do not delete
    at = next(i for i, k in enumerate(first.column("id").to_pylist()) if k % 3 == 0 and k % 7 != 1)
    stray = first.slice(at, 1)
    key = stray.column("id")[0].as_py()
    assert table.read(filter=pc.field("id") == key).column("ts").to_pylist() == [2]  # updated
    target = f"{uri}/{slices[1].base.path}"
    original = pq.read_table(target)
    pq.write_table(pa.concat_tables([original, stray.cast(original.schema)]), target)
    alone = slice_by_slice(monkeypatch, table.read)
    assert sorted(alone.filter(pc.field("id") == key).column("ts").to_pylist()) == [1, 2]
    assert sorted_rows(table.read()).equals(sorted_rows(alone))
