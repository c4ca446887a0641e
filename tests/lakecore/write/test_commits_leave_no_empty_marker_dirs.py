"""An instant's marker directory goes with its markers: commits, compactions and rollbacks leave no
empty `.weir/markers/<instant>/` directories behind on local disk, and `clean` or `repair --run`
removes those older versions left, but never the directory of a pending instant or of one newer
than the timeline they looked at (a writer makes its directory just before its first marker)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from lakecore import Table
from lakecore.concurrency import begin_write
from lakecore.services import CleanPolicy
from lakecore.services.repair import repair_lock, run_repair
from lakecore.write import Marker, create_marker

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("dt", pa.string())])


def rows(ids: range, ts: int) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "dt": pa.array(["x" if i % 2 else "y" for i in ids])})


def marker_dirs(uri: str) -> list[str]:
    root = Path(uri, ".weir", "markers")
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir()) if root.exists() else []


def test_a_series_of_commits_compactions_and_rollbacks_leaves_no_marker_dirs(tmp_path):
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=SCHEMA, record_key="id", partition_fields=["dt"], ordering_field="ts",
                     buckets=2)
    for ts in range(4):
        t.upsert(rows(range(ts * 10, ts * 10 + 10), ts))
        assert marker_dirs(uri) == []
    t.maintenance.compact()
    assert marker_dirs(uri) == []
    pending = begin_write(t.storage, t.config, t.lock, "upsert")
    create_marker(t.storage, Marker(pending.instant.requested_time, "dt=x/a.parquet", "create"))
    assert marker_dirs(uri), "a pending write's markers are in its directory"
    t.maintenance.rollback(pending.instant.requested_time, dry_run=False, force=True)
    assert marker_dirs(uri) == []
    newest = t.upsert(rows(range(100, 110), 9)).instant
    t.maintenance.rollback(newest.requested_time, dry_run=False)
    assert marker_dirs(uri) == []


def leftovers(uri: str, times: list[str]) -> None:
    """Empty directories as versions that deleted marker files only left them."""
    for time in times:
        os.makedirs(Path(uri, ".weir", "markers", time, "dt=x"))


def test_clean_and_repair_remove_leftover_dirs_but_not_those_of_pending_or_newer_instants(tmp_path):
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=SCHEMA, record_key="id", partition_fields=["dt"], ordering_field="ts",
                     buckets=2)
    done = [t.upsert(rows(range(0, 10), ts)).instant.requested_time for ts in range(3)]
    pending = begin_write(t.storage, t.config, t.lock, "upsert").instant.requested_time
    future = "99991231235959999"
    leftovers(uri, [*done, pending, future])
    # nothing to delete: it still tidies
    t.maintenance.clean(CleanPolicy("keep_latest_commits", 1), dry_run=False)
    assert marker_dirs(uri) == [pending, f"{pending}/dt=x", future, f"{future}/dt=x"]

    leftovers(uri, done[:1])
    run_repair(t.storage, repair_lock(t.storage), dry_run=False)
    assert marker_dirs(uri) == [pending, f"{pending}/dt=x", future, f"{future}/dt=x"]
