"""Archival: instants move into the LSM history and every read keeps working across it; archival
stops at pending instants, savepoints and the clean's retention; bad policies and damaged history
files give clear errors."""

import json

import pytest

from lakecore import Table
from lakecore.config import FILE_NAME
from lakecore.errors import CorruptMetadata, InvalidTableConfig, ServiceError
from lakecore.services import ArchivalPolicy, CleanPolicy
from lakecore.table import AfterCommitOptions, WriterOptions
from lakecore.timeline.history import HISTORY_DIR
from lakecore.timeline.history_store import KEPT_VERSIONS, HistoryStore, clear_history_cache
from lakecore.timeline.store import clear_cache
from tests.lakecore.services.conftest import HeldWrite, compact, keys, rows, snapshot
from tests.lakecore.services.conftest import create as create_table


def create(uri: str, mode: str, **kw) -> Table:
    """Tables whose writes do not archive inline: these tests run archival themselves."""
    t = create_table(uri, mode, **kw)
    return Table.open(t.uri, options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))

SMALL = ArchivalPolicy(min_instants=3, max_instants=5, fanout=3)


def _write_many(t: Table, n: int) -> list[tuple[str, list[dict]]]:
    """n writes (upserts and a delete every 4th), compacting every 5th; (instant, snapshot after)."""
    history = []
    for step in range(1, n + 1):
        if step % 4 == 0:
            instant = t.delete(keys([step % 7], step)).instant
        else:
            instant = t.upsert(rows([step % 7, step % 11, 20 + step], step)).instant
        history.append((instant.requested_time, snapshot(t)))
        if step % 5 == 0:
            compact(t)
    return history


def _history_files(t: Table) -> set[str]:
    return {f.path.rsplit("/", 1)[1] for f in t.storage.list_dir(HISTORY_DIR)}


def test_archived_instants_leave_the_active_timeline_and_every_read_still_works(tmp_path):
    t = create(str(tmp_path / "t"), "event_time", table_type="merge_on_read")
    history = _write_many(t, 30)
    total = t.timeline().total
    latest = snapshot(t)
    changes_before = t.read_changes(history[2][0], history[20][0]).sort_by("id").drop_columns([FILE_NAME])
    archived = 0
    for _ in range(12):  # repeated runs build levels: fanout 3 merges L0 files into L1 and on
        done = t.maintenance.archive(SMALL).archived
        archived += done.archived if done is not None else 0
        t.upsert(rows([99], 1000 + _))
        history.append((t.timeline().completed[-1].requested_time, snapshot(t)))
    timeline = t.timeline()
    assert archived > 30 and timeline.archived.count == archived
    assert len(timeline.completed) <= SMALL.max_instants + 1
    assert timeline.total == total + 12
    levels = {f.level for f in timeline.archived.manifest.files}
    assert max(levels) >= 1, levels

    clear_cache()
    clear_history_cache()  # cold: everything below comes from storage
    fresh = Table.open(t.uri)
    assert snapshot(fresh) != latest  # 99 was written since
    for instant, expected in history:
        assert snapshot(fresh, as_of=instant) == expected, instant
    again = fresh.read_changes(history[2][0], history[20][0]).sort_by("id").drop_columns([FILE_NAME])
    assert again.equals(changes_before)
    first = history[0][0]
    listed = fresh.archived_instants()
    assert len(listed) == archived
    inst = next(i for i in listed if i.requested_time == first)
    assert fresh.commit_metadata(inst).operation == "upsert"
    described = fresh.describe()["instants"]
    assert described["archived"] == archived and described["total"] == timeline.total
    # no active file of an archived instant is left, and the history holds only the kept versions
    active = t.storage.list_names(".weir/timeline")
    assert not [n for n in active if n[:17] <= timeline.archived.boundary and "_" in n[:18]
                and n.split("_")[1][:17] <= timeline.archived.boundary]
    assert len([n for n in _history_files(t) if n.startswith("manifest-")]) <= KEPT_VERSIONS
    assert len(HistoryStore(t.storage).pointer_versions()) <= KEPT_VERSIONS


def test_archival_respects_min_and_max(tmp_path):
    t = create(str(tmp_path / "t"), "commit_time")
    _write_many(t, 4)
    assert len(t.timeline().completed) == 4
    assert t.maintenance.archive(SMALL).archived is None  # not more than max_instants completed
    _write_many(t, 3)
    plan = t.maintenance.archive(SMALL, dry_run=True).plan
    assert len(plan.instants) == len(t.timeline().completed) - SMALL.min_instants
    assert t.timeline().archived.count == 0  # a dry run changes nothing
    done = t.maintenance.archive(SMALL).archived
    assert done.archived == len(plan.instants) and len(t.timeline().completed) == SMALL.min_instants


def test_archival_stops_at_a_pending_write_savepoint_and_clean_retention(tmp_path):
    t = create(str(tmp_path / "t"), "event_time", table_type="merge_on_read", concurrency_mode="non_blocking")
    _write_many(t, 4)
    held = HeldWrite(t, rows([1], 50))
    _write_many(t, 6)
    plan = t.maintenance.archive(SMALL, dry_run=True).plan
    assert "pending instant" in plan.stopped_by
    assert all(i.completion_time < held.txn.instant.requested_time for i in plan.instants)
    held.commit()
    assert t.maintenance.archive(SMALL).archived is not None
    assert {r["id"]: r["ts"] for r in snapshot(t)}[1] == 50  # the late write is there, archived around it

    s = create(str(tmp_path / "s"), "commit_time")
    _write_many(s, 3)
    pinned = s.timeline().completed[-1].requested_time
    s.maintenance.savepoint(pinned)
    _write_many(s, 8)
    plan = s.maintenance.archive(SMALL, dry_run=True).plan
    assert plan.stopped_by == f"savepoint on {pinned}"
    done = s.maintenance.archive(SMALL).archived   # the run says it too (`weir table archive` printed no why)
    assert done is not None and done.stopped_by == f"savepoint on {pinned}"
    assert pinned in [i.requested_time for i in s.timeline().completed]

    c = create(str(tmp_path / "c"), "commit_time")
    _write_many(c, 12)
    c.maintenance.clean(CleanPolicy("keep_latest_commits", 6), dry_run=False)
    plan = c.maintenance.archive(SMALL, dry_run=True).plan
    assert plan.stopped_by and plan.stopped_by.startswith("clean retention")


def test_bad_policies_are_refused():
    with pytest.raises(InvalidTableConfig, match="below max_instants"):
        ArchivalPolicy(min_instants=10, max_instants=10)
    with pytest.raises(InvalidTableConfig, match="fanout"):
        ArchivalPolicy(fanout=1)
    with pytest.raises(InvalidTableConfig, match="integer"):
        ArchivalPolicy(min_instants=0)


def test_a_corrupted_manifest_or_history_file_is_a_clear_error(tmp_path):
    t = create(str(tmp_path / "t"), "commit_time")
    history = _write_many(t, 12)
    t.maintenance.archive(SMALL)
    version = t.timeline().archived.manifest.version
    clear_history_cache()
    manifest = f"{HISTORY_DIR}/manifest-{version:012d}.json"
    good = t.storage.read(manifest)
    t.storage.write(manifest, good[: len(good) // 2])
    with pytest.raises(CorruptMetadata, match=r"history manifest .* truncated or corrupted"):
        Table.open(t.uri)
    t.storage.write(manifest, good)
    name = json.loads(good)["files"][0]["name"]
    data = t.storage.read(f"{HISTORY_DIR}/{name}")
    t.storage.write(f"{HISTORY_DIR}/{name}", data[:100])
    clear_history_cache()
    clear_cache()
    fresh = Table.open(t.uri)  # the active timeline and live files do not need the history files
    assert snapshot(fresh) == history[-1][1]
    with pytest.raises(CorruptMetadata, match=r"history file .* corrupted"):
        fresh.read(as_of=history[0][0])


def test_rollback_of_an_archived_instant_is_refused_clearly(tmp_path):
    t = create(str(tmp_path / "t"), "commit_time")
    history = _write_many(t, 12)
    t.maintenance.archive(SMALL)
    with pytest.raises(Exception, match="archived") as err:
        t.maintenance.rollback(history[0][0], dry_run=False)
    assert isinstance(err.value, (ServiceError, Exception))


def _data_files(t: Table) -> set[str]:
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


def test_clean_deletes_superseded_files_of_archived_instants_and_keeps_what_reads_need(tmp_path):
    t = create(str(tmp_path / "t"), "event_time", table_type="merge_on_read")
    history = _write_many(t, 30)  # compactions every 5 writes supersede slices
    assert t.maintenance.archive(SMALL).archived is not None
    timeline = t.timeline()
    superseded = {f.stat.path for f in timeline.archived.every_file()} - \
        {f.stat.path for f in timeline.archived.files}
    assert superseded, "the archived range holds superseded slices"
    # keep_by_hours reaching back into the archived range keeps every archived file
    plan = t.maintenance.clean(CleanPolicy("keep_by_hours", 24), dry_run=True).plan
    assert plan is None or not superseded & set(plan.files)
    # keep_latest_commits 2: the superseded archived files go, the latest snapshot stays
    t.maintenance.clean(CleanPolicy("keep_latest_commits", 2), dry_run=False)
    assert not superseded & _data_files(t)
    assert snapshot(t) == history[-1][1]
    for ts in (500, 501, 502):
        t.upsert(rows([1, 2], ts))
    # retention moves past the first clean
    t.maintenance.clean(CleanPolicy("keep_latest_commits", 2), dry_run=False)
    tiny = ArchivalPolicy(min_instants=1, max_instants=2, fanout=3)
    assert t.maintenance.archive(tiny).archived is not None
    # the clean is archived now: its deleted files left the live files for good
    assert not superseded & {f.stat.path for f in t.timeline().archived.every_file()}
    assert {r["id"]: r["ts"] for r in snapshot(t)}[1] == 502


def test_a_missing_manifest_is_a_clear_error_until_it_is_restored(tmp_path):
    from lakecore.timeline.history_store import manifest_path

    t = create(str(tmp_path / "t"), "commit_time")
    _write_many(t, 12)
    t.maintenance.archive(SMALL)
    version = t.timeline().archived.manifest.version
    clear_history_cache()
    data = t.storage.read(manifest_path(version))
    t.storage.delete(manifest_path(version))
    with pytest.raises(CorruptMetadata, match=f"version {version}.* is missing"):
        Table.open(t.uri)
    t.storage.write(manifest_path(version), data)
    assert Table.open(t.uri).timeline().archived.manifest.version == version


def test_readers_beside_a_writer_that_archives_and_merges_levels_never_fail(tmp_path):
    """A writer archiving inline after every write (tiny policy: history levels merge and old files
    are collected all the time) while readers open the table and read the latest snapshot and an
    archived point, over and over: every read succeeds and is consistent."""
    import threading

    tiny = ArchivalPolicy(min_instants=2, max_instants=3, fanout=2)
    t = create(str(tmp_path / "t"), "commit_time")
    first = t.upsert(rows([0], 0)).instant.requested_time
    writer = Table.open(t.uri, options=WriterOptions(after_commit=AfterCommitOptions(archival=tiny)))
    stop, errors, reads = threading.Event(), [], [0]

    def read_loop() -> None:
        seen = 0
        while not stop.is_set():
            try:
                fresh = Table.open(t.uri)
                ids = [r["id"] for r in snapshot(fresh)]
                assert ids == list(range(len(ids))) and len(ids) >= seen, ids  # keys only ever added
                seen = len(ids)
                assert [r["id"] for r in snapshot(fresh, as_of=first)] == [0]
                reads[0] += 1
            except Exception as exc:  # the test reports whatever a reader hit
                errors.append(exc)
                return

    readers = [threading.Thread(target=read_loop) for _ in range(2)]
    for r in readers:
        r.start()
    try:
        for n in range(1, 60):
            writer.upsert(rows([n], n))
    finally:
        stop.set()
        for r in readers:
            r.join()
    assert not errors, errors[0]
    assert reads[0] > 10
    timeline = t.timeline()
    assert timeline.archived.count > 50 and max(f.level for f in timeline.archived.manifest.files) >= 2
