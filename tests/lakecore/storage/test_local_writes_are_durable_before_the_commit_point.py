"""On local disk, every data file of an instant (and its directory entry) is fsynced before the
completed instant file is linked into place, and the timeline directory is synced after it: a power
loss cannot leave a completed instant that names truncated or missing files, or a truncated instant.
"""

import os

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.storage.local import TMP_MARK
from lakecore.timeline import TimelineStore


@pytest.fixture
def trace(monkeypatch):
    """Every fsync (by the path of its fd) and every link/rename (by target), in order."""
    events = _Trace()
    linked = events.linked
    real_fsync, real_link, real_replace = os.fsync, os.link, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def link(src, dst, *a, **kw):
        real_link(src, dst, *a, **kw)
        events.append(("link", os.path.abspath(dst)))
        linked[os.path.abspath(dst)] = os.path.abspath(src)

    def replace(src, dst, *a, **kw):
        real_replace(src, dst, *a, **kw)
        events.append(("replace", os.path.abspath(dst)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "link", link)
    monkeypatch.setattr(os, "replace", replace)
    return events


class _Trace(list):
    """(kind, path) events in order, and which temp file was linked to each link target."""

    def __init__(self) -> None:
        super().__init__()
        self.linked: dict[str, str] = {}


def _rows(n: int, start: int = 0) -> pa.Table:
    return pa.table({"id": list(range(start, start + n)), "ts": [1] * n,
                     "dt": [f"d{i % 2}" for i in range(start, start + n)]})


def _check_commit(table: Table, events: list[tuple[str, str]], instant, *, new_partitions: bool = False
                  ) -> None:
    root = table.uri
    done = os.path.join(root, ".weir/timeline", instant.file_name)
    commit_at = events.index(("link", done))
    before = events[:commit_at]
    synced = {p for kind, p in before if kind == "fsync"}
    meta = TimelineStore(table.storage).metadata(instant)
    assert meta.write_stats
    for stat in meta.write_stats:
        path = os.path.join(root, stat.path)
        assert path in synced, f"data file {stat.path} not fsynced before the commit point"
        assert os.path.dirname(path) in synced, f"directory of {stat.path} not synced before the commit"
    if new_partitions:  # new partition directories: their entries in the table root are durable too
        first_data = min(before.index(("fsync", os.path.join(root, s.path))) for s in meta.write_stats)
        assert ("fsync", root) in before[first_data:]
    # the instant file's own bytes were synced (as the temp file linked into place) before the link
    source = events.linked[done]
    assert TMP_MARK in source and ("fsync", source) in before
    # and the directory entry of the completed instant is synced after the link
    assert ("fsync", os.path.dirname(done)) in events[commit_at + 1:]
    # what nothing reads after a power loss is not synced (it would cost every commit dearly)
    assert not [p for kind, p in events if kind == "fsync" and
                p.startswith((f"{root}/.weir/markers", f"{root}/.weir/heartbeats"))]


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_data_files_are_durable_before_the_completed_instant_is_created(tmp_path, trace, table_type):
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("dt", pa.string())])
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="id", partition_fields=["dt"],
                     ordering_field="ts", buckets=2, table_type=table_type)
    first = t.upsert(_rows(20)).instant
    _check_commit(t, trace, first, new_partitions=True)
    trace.clear()
    second = t.upsert(_rows(10, 15)).instant
    _check_commit(t, trace, second)
    if table_type == "merge_on_read":  # a table service's base files too
        trace.clear()
        compaction = t.maintenance.compact().instant
        assert compaction is not None
        _check_commit(t, trace, compaction)
    assert t.read().num_rows == 25


def test_syncing_can_be_turned_off_for_tmpfs_and_benchmarks(tmp_path, trace, monkeypatch):
    monkeypatch.setenv("WEIR_FSYNC", "off")
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("dt", pa.string())])
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="id", buckets=1)
    t.upsert(_rows(5))
    assert [e for e in trace if e[0] == "fsync"] == []
    off = Table.open(str(tmp_path / "t"), storage_options={"fsync": True})
    off.upsert(_rows(5, 5))
    assert any(e[0] == "fsync" for e in trace)
