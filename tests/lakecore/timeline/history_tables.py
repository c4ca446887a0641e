"""Helpers for the history tests: a table whose history spans several files (and row groups, with
small checkpoints); what an as-of read returns at each of its instants; the reference checkpoints;
history files rewritten as they were written before checkpoints."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakecore import Table
from lakecore.errors import FilesCleaned
from lakecore.services import ArchivalPolicy, CleanPolicy
from lakecore.table import AfterCommitOptions, WriterOptions
from lakecore.timeline.checkpoint import SLICES, checkpoint_of, index_of
from lakecore.timeline.history import HISTORY_DIR, ROW_SCHEMA, files_of, latest_slices
from lakecore.timeline.history_store import clear_history_cache
from lakecore.timeline.store import clear_cache
from tests.lakecore.services.conftest import compact, create, rows, snapshot

SMALL = ArchivalPolicy(min_instants=3, max_instants=5, fanout=3)
CLEANED = "cleaned"  # what `expected` holds for an instant whose files a clean deleted


def history_table(uri: str) -> Table:
    """A merge-on-read table whose writes do not archive inline: write_steps archives."""
    create(uri, "event_time", table_type="merge_on_read")
    return Table.open(uri, options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))


def write_steps(t: Table, first: int, last: int, clean_at: tuple[int, ...] = ()) -> dict[str, object]:
    """Upserts `first`..`last` (compacting every 5th, archiving every 4th, cleaning after those in
    `clean_at`); what a read as of each of them gives, by requested time."""
    history: dict[str, object] = {}
    for step in range(first, last + 1):
        written = t.upsert(rows([step % 7, step % 11, 20 + step], step)).instant
        history[written.requested_time] = snapshot(t)
        if step % 5 == 0:
            compact(t)
        if step in clean_at:
            t.maintenance.clean(CleanPolicy("keep_latest_commits", 2), dry_run=False)
        if step % 4 == 0:
            t.maintenance.archive(SMALL)
    return history


def reads(t: Table, points: list[str]) -> dict[str, object]:
    """Cold reads as of each point (CLEANED where a clean deleted files the read needs)."""
    out: dict[str, object] = {}
    for point in points:
        cold()
        try:
            out[point] = snapshot(Table.open(t.uri), as_of=point)
        except FilesCleaned:
            out[point] = CLEANED
    return out


def cold() -> None:
    clear_cache()
    clear_history_cache()


def history_paths(t: Table) -> list[str]:
    """The history files the current manifest names, oldest first."""
    manifest = Table.open(t.uri).timeline().archived.manifest
    return [f"{HISTORY_DIR}/{f.name}" for f in sorted(manifest.files, key=lambda f: f.min_completion)]


def all_rows(t: Table) -> pa.Table:
    """Every archived instant's history row, oldest first."""
    return pa.concat_tables([pq.read_table(pa.BufferReader(t.storage.read(p)), columns=ROW_SCHEMA.names)
                             for p in history_paths(t)])


def reference_slices(rows: pa.Table, upto: int) -> pa.Table:
    """The latest slices as of the `upto`-th history row: from every file written up to it."""
    return latest_slices(files_of(rows.slice(0, upto + 1)))


def checkpointed_files(t: Table) -> int:
    """How many of the history files carry checkpoints; asserts each file's row groups end at its
    checkpoints and each checkpoint holds the latest slices of every file written up to it."""
    everything = all_rows(t)
    seen, out = 0, 0
    for path in history_paths(t):
        data = t.storage.read(path)
        meta = pq.read_metadata(pa.BufferReader(data))
        index = index_of(meta.metadata)
        if index is None:
            seen += meta.num_rows
            continue
        out += 1
        assert meta.num_row_groups == len(index), path
        f = pq.ParquetFile(pa.BufferReader(data))
        for i, group in enumerate(index):
            part = f.read_row_group(i)
            assert part.num_rows == group.rows
            assert part.column("completion_time")[-1].as_py() == group.max_completion
            assert pc.is_valid(part.column(SLICES)).to_pylist() == [False] * (group.rows - 1) + [True]
            seen += group.rows
            assert checkpoint_of(part).equals(reference_slices(everything, seen - 1)), (path, i)
    assert seen == everything.num_rows
    return out


def rewrite_without_checkpoints(t: Table) -> None:
    """Rewrite the history files in place as they were written before checkpoints: ROW_SCHEMA, one row
    group, no row-group index in the footer."""
    for path in history_paths(t):
        rows = pq.read_table(pa.BufferReader(t.storage.read(path)), columns=ROW_SCHEMA.names)
        buf = io.BytesIO()
        pq.write_table(rows.cast(ROW_SCHEMA), buf, compression="zstd")
        t.storage.write(path, buf.getvalue())
    cold()
