"""History files carry checkpoints: the latest slice of every file group as of the last instant of
each row group. A read as of an archived instant decodes the checkpoint before its point and the row
group holding it, not every instant up to it, and returns what the full history gives; the
completion-time lookup and the cleaned-files check pick their row groups from the footer too."""

import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from lakecore.errors import CorruptMetadata
from lakecore.timeline import TimelineStore
from lakecore.timeline.checkpoint import INDEX_KEY, SLICES, checkpoint_of, index_of, with_checkpoints
from lakecore.timeline.history import FILE_STRUCT, LIVE_SCHEMA, ROW_SCHEMA, files_of, latest_slices
from lakecore.timeline.history_store import decoded
from tests.lakecore.timeline.history_tables import (
    CLEANED,
    all_rows,
    checkpointed_files,
    cold,
    history_paths,
    history_table,
    reads,
    write_steps,
)


def test_history_files_hold_row_groups_ending_at_checkpoints_of_the_latest_slices(tmp_path,
                                                                                   small_checkpoints):
    t = history_table(str(tmp_path / "t"))
    write_steps(t, 1, 45)
    paths = history_paths(t)
    assert checkpointed_files(t) == len(paths) > 1
    assert any(pq.read_metadata(pa.BufferReader(t.storage.read(p))).num_row_groups > 1 for p in paths)


def test_an_as_of_read_decodes_the_checkpoint_before_its_point_and_one_row_group(tmp_path, small_checkpoints):
    t = history_table(str(tmp_path / "t"))
    expected = write_steps(t, 1, 40)
    fresh = Table.open(t.uri)
    boundary = fresh.timeline().archived.boundary  # views as of it come from the live files
    archived = [i.requested_time for i in fresh.archived_instants()
                if i.requested_time in expected and (i.completion_time or "") < boundary]
    assert len(archived) > 20
    for point in archived:
        got = reads(t, [point])[point]
        assert got == expected[point], point
        files = [(name, g) for name, c, g in decoded(t.uri) if c == "files"]
        slices = [(name, g) for name, c, g in decoded(t.uri) if c == SLICES]
        assert len(files) <= 1 and len(slices) <= 1 and files + slices, (point, decoded(t.uri))
        assert all(g >= 0 for _, g in files + slices), "no history file decoded whole"
        assert not [c for _, c, _ in decoded(t.uri) if c == "deleted"], "no clean archived: nothing to check"


def test_the_cleaned_files_check_decodes_only_row_groups_holding_cleans(tmp_path, small_checkpoints):
    t = history_table(str(tmp_path / "t"))
    expected = write_steps(t, 1, 40, clean_at=(12, 28))  # the second moves retention past the first
    fresh = Table.open(t.uri)
    boundary = fresh.timeline().archived.boundary
    archived = [i.requested_time for i in fresh.archived_instants()
                if i.requested_time in expected and (i.completion_time or "") < boundary]
    got = reads(t, archived)
    assert CLEANED in got.values()  # the archived clean deleted what these reads need: refused, no rows
    assert all(v in (CLEANED, expected[p]) for p, v in got.items())
    cold()
    deleted = TimelineStore(t.storage).cleaned_in_history(fresh.timeline().archived.manifest)
    everything = all_rows(t)
    assert deleted.to_pylist() == pc.list_flatten(everything.column("deleted")).to_pylist() != []
    checked = {(name, g) for name, c, g in decoded(t.uri) if c == "deleted"}
    with_cleans = set()
    for path in history_paths(t):
        index = index_of(pq.read_metadata(pa.BufferReader(t.storage.read(path))).metadata)
        assert index is not None
        with_cleans |= {(path.rsplit("/", 1)[1], i) for i, g in enumerate(index) if g.cleans}
    assert checked == with_cleans and len(with_cleans) == 1


def _random_rows(rng: random.Random, n: int, t0: int) -> pa.Table:
    files = [[{"partition": rng.choice(["", "a"]), "file_id": rng.choice(["f1", "f2", "f3"]),
               "file": f"x{t0 + i:03d}-{j}", "kind": rng.choice(["base", "log", "log"]), "records": 1,
               "deletes": 0, "bytes": 1, "base_instant": None} for j in range(rng.randint(0, 4))]
             for i in range(n)]
    times = [f"{t0 + i:04d}" for i in range(n)]
    return pa.table({"requested_time": times, "completion_time": times, "action": ["commit"] * n,
                     "metadata": [b""] * n, "plan": [b""] * n,
                     "files": pa.array(files, pa.list_(FILE_STRUCT)),
                     "deleted": pa.array([[]] * n, pa.list_(pa.string()))}, schema=ROW_SCHEMA)


def test_checkpoints_are_the_latest_slices_of_every_file_up_to_them():
    rng = random.Random(27)
    for _ in range(200):
        earlier = _random_rows(rng, rng.randint(0, 10), 0)
        rows = _random_rows(rng, rng.randint(1, 30), 100)
        every = rng.randint(1, 6)
        out = with_checkpoints(latest_slices(files_of(earlier)), rows, every)
        assert out.drop_columns([SLICES]).equals(rows)
        valid = pc.is_valid(out.column(SLICES)).to_pylist()
        assert valid[-1]
        ends = [i for i, v in enumerate(valid) if v]
        assert all(b - a <= every for a, b in zip([-1, *ends], ends, strict=False))
        for end in ends:
            got = checkpoint_of(out.slice(end, 1))
            want = latest_slices(pa.concat_tables([files_of(earlier), files_of(rows.slice(0, end + 1))]))
            assert got.equals(want.cast(LIVE_SCHEMA)), (every, end)


def test_a_damaged_row_group_index_is_a_clear_error(tmp_path, small_checkpoints):
    t = history_table(str(tmp_path / "t"))
    expected = write_steps(t, 1, 20)
    path = history_paths(t)[0]
    rows = pq.read_table(pa.BufferReader(t.storage.read(path)))
    buf = pa.BufferOutputStream()
    pq.write_table(rows.replace_schema_metadata({INDEX_KEY: b"[[3,"}), buf)
    t.storage.write(path, buf.getvalue().to_pybytes())
    point = next(iter(expected))
    cold()
    with pytest.raises(CorruptMetadata, match=f"history file {path} is truncated or corrupted.*restore it"):
        Table.open(t.uri).read(as_of=point)
