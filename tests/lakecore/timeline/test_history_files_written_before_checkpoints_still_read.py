"""History files written before checkpoints (ROW_SCHEMA in one row group, no row-group index in the
footer) still read: as of every archived instant, a table whose history is in that layout reads what
it read with checkpoints, decoding those files whole; archival goes on over it (its new files get
checkpoints folded from the old files, merges mix both layouts) and every instant keeps reading the
same."""

import pyarrow as pa
import pyarrow.parquet as pq

from lakecore import Table
from lakecore.timeline.checkpoint import index_of
from lakecore.timeline.history_store import decoded
from tests.lakecore.timeline.history_tables import (
    checkpointed_files,
    history_paths,
    history_table,
    reads,
    rewrite_without_checkpoints,
    write_steps,
)


def _points(t: Table, expected: dict[str, object]) -> list[str]:
    """The archived writes a read as of comes from the history for (before the boundary)."""
    fresh = Table.open(t.uri)
    boundary = fresh.timeline().archived.boundary
    return [i.requested_time for i in fresh.archived_instants()
            if i.requested_time in expected and (i.completion_time or "") < boundary]


def _layouts(t: Table) -> list[bool]:
    """Per history file, oldest first: written with checkpoints?"""
    return [index_of(pq.read_metadata(pa.BufferReader(t.storage.read(p))).metadata) is not None
            for p in history_paths(t)]


def test_history_files_without_checkpoints_read_as_before_and_archival_goes_on_over_them(
        tmp_path, small_checkpoints):
    t = history_table(str(tmp_path / "t"))
    expected = write_steps(t, 1, 30)
    points = _points(t, expected)
    assert len(points) > 15
    with_checkpoints = reads(t, points)
    assert with_checkpoints == {p: expected[p] for p in points}

    rewrite_without_checkpoints(t)
    assert not any(_layouts(t))
    assert reads(t, points) == with_checkpoints
    assert {g for _, c, g in decoded(t.uri) if c == "files"} == {-1}  # decoded whole

    expected |= write_steps(t, 31, 38)  # new level-0 files, folded from the old files
    layouts = _layouts(t)
    assert not layouts[0] and layouts[-1], layouts
    assert checkpointed_files(t) == sum(layouts)
    points = _points(t, expected)
    assert reads(t, points) == {p: expected[p] for p in points}

    expected |= write_steps(t, 39, 70)  # merges of both layouts
    assert checkpointed_files(t) == sum(_layouts(t)) > 0
    points = _points(t, expected)
    assert reads(t, points) == {p: expected[p] for p in points}
