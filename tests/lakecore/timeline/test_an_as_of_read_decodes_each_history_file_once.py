"""Reading as of an archived instant resolves the point, builds the view and checks for cleaned files
from the same history files: each is read from storage and decoded once, and the latest slices found
without a join are those a join of every file with its group's newest base finds."""

import random

import pyarrow as pa
import pyarrow.compute as pc

from lakecore import Table
from lakecore.timeline.history import HISTORY_DIR, LIVE_SCHEMA, latest_slices
from lakecore.timeline.history_store import clear_history_cache
from lakecore.timeline.store import clear_cache
from tests.lakecore.timeline.test_loading_the_timeline_reads_archived_files_only_when_asked import (
    CountingReads,
    archived_table,
)


def test_an_as_of_read_reads_each_history_file_once(tmp_path):
    t = archived_table(tmp_path)
    points = [i.requested_time for i in t.archived_instants()]
    assert len(points) >= 3
    for point in (points[1], points[-1]):
        expected = t.read(as_of=point).sort_by("id")
        clear_cache()
        clear_history_cache()
        storage = CountingReads(t.storage)
        got = Table(storage, t.config).read(as_of=point).sort_by("id")
        assert got.equals(expected)
        history = [p for p in storage.paths if p.startswith(f"{HISTORY_DIR}/L")]
        assert history and len(history) == len(set(history)), history


def _joined(files: pa.Table) -> pa.Table:
    """The reference: every file joined with its group's newest base instant."""
    bases = files.filter(pc.equal(files.column("kind"), "base"))
    if bases.num_rows == 0:
        return files
    newest = bases.group_by(["partition", "file_id"]).aggregate([("instant_time", "max")])
    joined = files.join(newest, ["partition", "file_id"], join_type="left outer")
    lb = joined.column("instant_time_max")
    keep = pc.if_else(pc.equal(joined.column("kind"), "base"), pc.equal(joined.column("instant_time"), lb),
                      pc.or_kleene(pc.is_null(lb), pc.greater_equal(joined.column("completion_time"), lb)))
    return joined.filter(pc.fill_null(keep, False)).select(LIVE_SCHEMA.names)


def test_latest_slices_are_those_of_a_join_with_each_groups_newest_base():
    rng = random.Random(27)
    for _ in range(500):
        n = rng.randint(0, 30)
        files = pa.Table.from_pylist([
            {"partition": rng.choice(["", "a", "b"]), "file_id": rng.choice(["f1", "f2", "f3"]),
             "file": f"x{i:02d}",
             "kind": rng.choice(["base", "log", "log"]), "records": 1, "deletes": 0, "bytes": 1,
             "base_instant": None, "instant_time": f"{(t := rng.randint(1, 20)):03d}",
             "completion_time": f"{t + rng.randint(0, 3):03d}"} for i in range(n)], schema=LIVE_SCHEMA)
        got = latest_slices(files)
        assert got.column("file").to_pylist() == sorted(got.column("file").to_pylist())  # input order kept
        assert got.equals(_joined(files).sort_by("file"))
