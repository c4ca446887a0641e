"""Early conflict detection: the younger of two overlapping writers stops before writing a file."""

import pickle
import time

import numpy as np
import pyarrow as pa
import pytest

from lakecore import ConflictOptions, FileOptions, MarkerOptions, Table, WriterOptions
from lakecore.concurrency import begin_write, commit_write
from lakecore.concurrency.conflicts.early import EarlyConflictDetector, EarlyDetection
from lakecore.concurrency.liveness.heartbeat import Heartbeat, HeartbeatConfig
from lakecore.errors import EarlyConflict, WriteConflict
from lakecore.layout import bucket_file_id
from lakecore.write import conform, route, write_file_group
from tests.lakecore.concurrency.conflicts.test_occ_conflicts import SCHEMA, data_files, keys_in_bucket

FAST = HeartbeatConfig(interval_s=0.2, tolerable_misses=3)


def rows(ids, tag):
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": [1] * len(ids), "v": [tag] * len(ids)})


def table(tmp_path, strategy="direct", **kw):
    opts = WriterOptions(heartbeat=FAST,
                         conflicts=ConflictOptions(early_detection=EarlyDetection(strategy, **kw)))
    return Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", options=opts)


def open_writer(t: Table, ids, tag):
    """An older writer that has written its files (markers exist) but not committed; heartbeat live."""
    txn = begin_write(t.storage, t.config, t.lock, "upsert")
    hb = Heartbeat(t.storage, txn.instant.requested_time, FAST)
    hb.start()
    groups = route(conform(rows(ids, tag), t.config, "upsert").rows, t.config)
    stats = [s for g in groups for s in write_file_group(txn.context(), g)]
    return txn, stats, hb


def test_younger_writer_stops_before_writing_into_an_older_live_writers_file_group(tmp_path):
    t = table(tmp_path)
    older, older_stats, hb = open_writer(t, keys_in_bucket(1, 3), "older")
    before = data_files(t)
    with pytest.raises(EarlyConflict) as err:
        t.upsert(rows(keys_in_bucket(0, 3) + keys_in_bucket(1, 3), "younger"))
    e = err.value
    assert e.other == older.instant.requested_time and e.instant > older.instant.requested_time
    assert e.file_groups == {("", bucket_file_id(1))}
    assert "retry" in str(e) and older.instant.requested_time in str(e)
    report = e.report()
    assert report["other"] == older.instant.requested_time and report["bytes_written"] == e.bytes_written
    assert data_files(t) == before  # the younger write's files are gone
    assert [i.requested_time for i in t.timeline().pending] == [older.instant.requested_time]
    commit_write(older, older_stats, lock=t.lock)
    hb.stop()
    assert {r["v"] for r in t.read().to_pylist()} == {"older"}


def test_an_older_writer_does_not_check_younger_ones(tmp_path):
    t = table(tmp_path)
    old = begin_write(t.storage, t.config, t.lock, "upsert")
    young, young_stats, hb = open_writer(t, keys_in_bucket(2, 2), "young")  # younger, markers exist
    detector = EarlyConflictDetector(old.instant, EarlyDetection("direct"), FAST)
    groups = route(conform(rows(keys_in_bucket(2, 2), "old"), t.config, "upsert").rows, t.config)
    old_stats = [s for g in groups for s in write_file_group(old.context(markers=detector), g)]
    commit_write(old, old_stats, lock=t.lock)  # the older one goes through ...
    with pytest.raises(WriteConflict):  # ... and the younger one loses, at the latest at commit
        commit_write(young, young_stats, lock=t.lock)
    hb.stop()


def test_dead_older_writers_are_ignored(tmp_path):
    t = table(tmp_path)
    txn = begin_write(t.storage, t.config, t.lock, "upsert")  # no heartbeat: it died
    groups = route(conform(rows(keys_in_bucket(1, 2), "dead"), t.config, "upsert").rows, t.config)
    [write_file_group(txn.context(), g) for g in groups]
    time.sleep(FAST.timeout_ms / 1000 + 0.1)  # a write that never beat is dead once its start is old
    t.upsert(rows(keys_in_bucket(1, 2), "alive"))
    assert {r["v"] for r in t.read().to_pylist()} == {"alive"}


def test_a_write_completed_since_we_started_is_detected_before_our_next_file(tmp_path):
    t = table(tmp_path)
    ours = begin_write(t.storage, t.config, t.lock, "upsert")
    Table.open(t.uri).upsert(rows(keys_in_bucket(3, 2), "theirs"))  # starts after us, completes first
    detector = EarlyConflictDetector(ours.instant, EarlyDetection("direct"), FAST)
    groups = route(conform(rows(keys_in_bucket(3, 2), "ours"), t.config, "upsert").rows, t.config)
    with pytest.raises(EarlyConflict, match="completed at"):
        write_file_group(ours.context(markers=detector), groups[0])


def test_without_early_detection_the_loser_fails_only_at_commit(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id",
                     options=WriterOptions(heartbeat=FAST))
    older, older_stats, hb = open_writer(t, keys_in_bucket(1, 3), "older")
    young = begin_write(t.storage, t.config, t.lock, "upsert")
    groups = route(conform(rows(keys_in_bucket(1, 3), "young"), t.config, "upsert").rows, t.config)
    young_stats = [s for g in groups for s in write_file_group(young.context(), g)]  # writes everything
    commit_write(older, older_stats, lock=t.lock)
    hb.stop()
    with pytest.raises(WriteConflict):
        commit_write(young, young_stats, lock=t.lock)


def test_detector_and_error_pickle_for_spark_executors(tmp_path):
    t = table(tmp_path)
    txn = begin_write(t.storage, t.config, t.lock, "upsert")
    det = EarlyConflictDetector(txn.instant, EarlyDetection("direct"), FAST)
    assert pickle.loads(pickle.dumps(det)) == det
    err = EarlyConflict("m", instant="1", other="0", file_groups=frozenset({("", "x")}), bytes_written=5)
    back = pickle.loads(pickle.dumps(err))
    assert back.report() == err.report()


@pytest.mark.zookeeper
def test_direct_markers_inside_a_zookeeper_lock(tmp_path, zookeeper_server):
    t = table(tmp_path, "direct_zk", zookeeper=zookeeper_server.connect_string)
    older, older_stats, hb = open_writer(t, keys_in_bucket(1, 2), "older")
    with pytest.raises(EarlyConflict):
        t.upsert(rows(keys_in_bucket(1, 2), "younger"))
    hb.stop()
    commit_write(older, older_stats, lock=t.lock)
    t.upsert(rows(keys_in_bucket(1, 2), "later"))  # no writer left in flight: goes through
    assert {r["v"] for r in t.read().to_pylist()} == {"later"}


def test_large_writer_rolling_files_stops_within_one_file(tmp_path):
    opts = WriterOptions(heartbeat=FAST, conflicts=ConflictOptions(early_detection=EarlyDetection("direct")),
                         files=FileOptions(max_rows_per_file=100))
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=1, options=opts)
    ours = begin_write(t.storage, t.config, t.lock, "upsert")
    ids = np.arange(5000)
    data = pa.table({"id": pa.array(ids), "ts": pa.array(np.ones(5000, np.int64)), "v": ["big"] * 5000})
    (group,) = route(conform(data, t.config, "upsert").rows, t.config)
    detector = EarlyConflictDetector(ours.instant, EarlyDetection("direct"), FAST)
    Table.open(t.uri).upsert(rows([1], "small"))  # a younger small write commits into the group first
    with pytest.raises(EarlyConflict):
        write_file_group(ours.context(markers=detector, max_rows_per_file=100), group)


def test_marker_service_checks_asynchronously_and_refuses_the_next_marker(tmp_path):
    opts = WriterOptions(heartbeat=FAST, files=FileOptions(max_rows_per_file=50),
                         conflicts=ConflictOptions(EarlyDetection("marker_service", period_s=0.02)),
                         markers=MarkerOptions(batch_interval_s=0.01))
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=1, options=opts)
    older, older_stats, hb = open_writer(t, [1], "older")
    before = data_files(t)
    ids = np.arange(20_000)
    ones = pa.array(np.ones(len(ids), np.int64))
    big = pa.table({"id": pa.array(ids), "ts": ones, "v": ["big"] * len(ids)})
    with pytest.raises(EarlyConflict) as err:
        t.upsert(big)
    assert err.value.other == older.instant.requested_time
    assert err.value.file_groups == {("", bucket_file_id(0))}
    assert data_files(t) == before
    hb.stop()
    commit_write(older, older_stats, lock=t.lock)


def test_batched_markers_write_and_roll_back_like_direct_ones(tmp_path):
    opts = WriterOptions(heartbeat=FAST, markers=MarkerOptions(batched=True, batch_interval_s=0.01))
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", options=opts)
    t.upsert(rows(list(range(40)), "a"))
    assert t.read().num_rows == 40
    assert not [f for f in t.storage.list_tree(".weir/markers")]  # deleted after the commit
    # a failing write is rolled back through its MARKERS files
    import lakecore.write.file_writer as fw
    real = fw.write_data_file
    calls = []

    def failing(*a, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(*a, **kw)

    fw.write_data_file = failing
    try:
        before = data_files(t)
        with pytest.raises(OSError):
            t.upsert(rows(list(range(40, 80)), "b"))
    finally:
        fw.write_data_file = real
    assert data_files(t) == before and t.timeline().pending == ()


@pytest.mark.parametrize("batched", [False, True])
def test_an_older_writer_that_can_never_commit_stops_nobody(tmp_path, batched):
    """An older live writer on our file group that a write completed into since it started fails at
    its commit whatever we do: a younger writer's early detection does not stop for it."""
    from lakecore.concurrency.conflicts.early import find_early_conflict

    t = table(tmp_path)
    keys = keys_in_bucket(1, 6)
    doomed, doomed_stats, hb = open_writer(t, keys[:2], "doomed")
    Table.open(t.uri).upsert(rows(keys[2:4], "winner"))   # began after `doomed`, completed first
    ours = begin_write(t.storage, t.config, t.lock, "upsert")
    group = ("", bucket_file_id(1))
    assert find_early_conflict(t.storage, ours.instant, {group}, FAST, check_commits=True,
                               batched=batched) is None
    detector = EarlyConflictDetector(ours.instant, EarlyDetection("direct"), FAST)
    groups = route(conform(rows(keys[4:], "ours"), t.config, "upsert").rows, t.config)
    ours_stats = [s for g in groups for s in write_file_group(ours.context(markers=detector), g)]
    commit_write(ours, ours_stats, lock=t.lock)
    with pytest.raises(WriteConflict):
        commit_write(doomed, doomed_stats, lock=t.lock)
    hb.stop()
    assert {r["v"] for r in t.read().to_pylist()} == {"winner", "ours"}
    # a live older writer that can still commit stops us as before
    pending, _, hb2 = open_writer(t, keys_in_bucket(2, 2), "pending")
    later = begin_write(t.storage, t.config, t.lock, "upsert")
    found = find_early_conflict(t.storage, later.instant, {("", bucket_file_id(2))}, FAST,
                                check_commits=True, batched=batched)
    assert found is not None and found.other == pending.instant.requested_time
    hb2.stop()
