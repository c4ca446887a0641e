"""A scan is a bounded pipeline: its first batch arrives while most file slices are not read yet, at most
`in_flight` slices are read ahead of the consumer, and a scan stopped early reads nothing more. (Small
slices of a partition are read together as one unit, `read_units`; these tables' slices are all small,
so the tests here make every slice its own unit, and the last one bounds the units.)

Reads are observed at the storage: the table's own local files, through a filesystem that records which
files are opened (a real one: every byte is read from disk)."""

from __future__ import annotations

import threading

import fsspec.implementations.local
import pyarrow.fs as pafs
import pytest

from lakecore import Table
from lakecore.read import scan as scan_module
from lakecore.read.scan import default_in_flight, read_units
from lakecore.storage.local import LocalStorage
from tests.lakecore.table.scan_tables import merge_on_read_table


class RecordingFileSystem(fsspec.implementations.local.LocalFileSystem):
    cachable = False  # one per storage, not fsspec's shared instance

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []
        self._guard = threading.Lock()

    def _open(self, path, mode="rb", **kwargs):
        if "r" in mode:
            with self._guard:
                self.opened.append(self._strip_protocol(path))
        return super()._open(path, mode=mode, **kwargs)


class RecordingStorage(LocalStorage):
    """The table's local storage, with its data-file reads recorded."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.files = RecordingFileSystem()

    def arrow(self) -> tuple[pafs.FileSystem, str]:
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.files)), self.uri


def slices_read(storage: RecordingStorage, scan) -> set[int]:
    opened = {p.removeprefix(f"{storage.uri}/") for p in storage.files.opened}
    return {i for i, fs in enumerate(scan.slices) if any(f.path in opened for f in fs.files)}


@pytest.fixture
def slice_by_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_module, "SMALL_SLICE_ROWS", 0)


@pytest.mark.usefixtures("slice_by_slice")
def test_the_first_batch_arrives_before_later_slices_are_read(tmp_path):
    ahead = default_in_flight()
    uri = str(tmp_path / "t")
    merge_on_read_table(uri, buckets=2 * ahead + 2, rows=2_000)
    storage = RecordingStorage(uri)
    table = Table.open(uri)
    table = Table(storage, table.config)

    scan = table.scan()
    assert scan.in_flight == ahead
    total = len(scan.slices)
    assert total > 2 * (ahead + 1)
    assert all(len(fs.files) > 1 for fs in scan.slices[:ahead + 1])  # merged slices: base and logs
    batches = scan.to_batches()
    assert storage.files.opened == []  # planned, not read
    first = next(batches)
    assert first.num_rows > 0
    assert len(slices_read(storage, scan)) <= ahead + 1 < total
    rest = list(batches)
    assert slices_read(storage, scan) == set(range(total))
    assert sum(b.num_rows for b in [first, *rest]) == table.read().num_rows


@pytest.mark.usefixtures("slice_by_slice")
def test_a_scan_stopped_early_reads_no_more_slices(tmp_path):
    ahead = default_in_flight()
    uri = str(tmp_path / "t")
    merge_on_read_table(uri, buckets=2 * ahead + 2, rows=2_000)
    storage = RecordingStorage(uri)
    scan = Table(storage, Table.open(uri).config).scan(columns=["id"])
    batches = scan.to_batches()
    next(batches)
    batches.close()  # waits for the slices already started
    read = slices_read(storage, scan)
    assert len(read) <= ahead + 1
    assert slices_read(storage, scan) == read


def test_small_slices_are_read_a_few_units_ahead(tmp_path, monkeypatch):
    """Small slices go in units of at most SMALL_SLICE_ROWS stored rows; the scan reads at most
    `in_flight` units ahead of the consumer."""
    monkeypatch.setattr(scan_module, "SMALL_SLICE_ROWS", 1_000)
    ahead = default_in_flight()
    uri = str(tmp_path / "t")
    merge_on_read_table(uri, buckets=2 * ahead + 2, rows=4_000)
    storage = RecordingStorage(uri)
    scan = Table(storage, Table.open(uri).config).scan()
    units = read_units(scan.plan)
    assert sorted(i for unit in units for i in [scan.slices.index(fs) for fs in unit]) == \
        list(range(len(scan.slices)))   # every slice once, in order
    assert len(units) > 2 * (ahead + 1) and any(len(unit) > 1 for unit in units)
    for unit in units:
        if len(unit) > 1:
            assert len({fs.partition for fs in unit}) == 1
            assert sum(f.records for fs in unit for f in fs.files) <= 1_000
    batches = scan.to_batches()
    next(batches)
    read = slices_read(storage, scan)
    assert read <= {scan.slices.index(fs) for unit in units[:ahead + 1] for fs in unit}
    batches.close()
