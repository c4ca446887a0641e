"""Inline table services: a write runs compaction / clustering / clean right after it commits when
they are due."""

import pyarrow as pa
import pytest

from lakecore import AfterCommitOptions, Table, WriterOptions
from lakecore.errors import InvalidTableConfig
from lakecore.services import ClusteringStrategy, Trigger, due
from lakecore.timeline import Instant, State, Timeline
from lakecore.timeline.instant_time import format_ms, to_epoch_ms

T0 = 1_795_000_000_000


def timeline(*actions_at_seconds):
    out = []
    for n, (action, sec) in enumerate(actions_at_seconds):
        t = format_ms(T0 + int(sec * 1000) + n)
        out.append(Instant(t, action, State.COMPLETED, t))
    return Timeline.of(out)


def test_commits_time_either_both():
    tl = timeline(("deltacommit", 0), ("deltacommit", 1), ("compaction", 2), ("deltacommit", 3),
                  ("deltacommit", 4))
    now = to_epoch_ms(tl.completed[-1].completion_time or "")
    assert due(Trigger("commits", 2), tl, "compaction", now)          # two since the last compaction
    assert not due(Trigger("commits", 3), tl, "compaction", now)
    assert not due(Trigger("time", max_seconds=10), tl, "compaction", now)
    assert due(Trigger("time", max_seconds=10), tl, "compaction", now + 9_000)
    assert due(Trigger("either", 3, 10), tl, "compaction", now + 9_000)
    assert not due(Trigger("both", 3, 10), tl, "compaction", now + 9_000)
    assert due(Trigger("both", 2, 10), tl, "compaction", now + 9_000)
    assert due(Trigger("commits", 4), tl, "clean", now)  # never cleaned: every write counts
    assert not due(Trigger("time", max_seconds=1), timeline(("compaction", 0)), "compaction", T0 + 99_000)
    with pytest.raises(InvalidTableConfig):
        Trigger("sometimes")


def test_a_write_compacts_inline_every_n_delta_commits(tmp_path):
    opts = WriterOptions(after_commit=AfterCommitOptions(compaction=Trigger("commits", 3)))
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("v", pa.int64())]),
                     record_key="id", buckets=2, options=opts)
    for n in range(7):
        t.upsert(pa.table({"id": pa.array([n % 4], pa.int64()), "v": pa.array([n], pa.int64())}))
    actions = [i.action for i in t.timeline().completed]
    assert actions.count("compaction") == 2 and actions[3] == "compaction"
    assert {r["id"]: r["v"] for r in t.read().to_pylist()} == {0: 4, 1: 5, 2: 6, 3: 3}


def test_a_write_cleans_inline_when_due(tmp_path):
    opts = WriterOptions(after_commit=AfterCommitOptions(compaction=Trigger("commits", 1),
                                                         clean=Trigger("commits", 1)))
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64())]), record_key="id",
                     buckets=1, options=opts)
    for n in range(12):
        t.upsert(pa.table({"id": pa.array([n], pa.int64())}))
    actions = [i.action for i in t.timeline().completed]
    assert "clean" in actions and t.read().num_rows == 12


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_a_write_clusters_inline_every_n_commits(tmp_path, table_type):
    after = AfterCommitOptions(clustering=Trigger("commits", 3),
                               clustering_strategy=ClusteringStrategy("all", ("v",)))
    opts = WriterOptions(after_commit=after)
    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("v", pa.int64())]),
                     record_key="id", buckets=2, options=opts, table_type=table_type)  # type: ignore[arg-type]
    for n in range(7):
        t.upsert(pa.table({"id": pa.array([n % 4], pa.int64()), "v": pa.array([n], pa.int64())}))
    actions = [i.action for i in t.timeline().completed]
    assert actions.count("replacecommit") == 2 and actions[3] == "replacecommit"
    assert {r["id"]: r["v"] for r in t.read().to_pylist()} == {0: 4, 1: 5, 2: 6, 3: 3}
