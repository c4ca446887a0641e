"""A write whose completed instant file is lost (deleted by hand, left out of a restore) looks pending,
but its data files have no markers, which only a completed write leaves. The lazy cleanup used to roll
it back once its heartbeat had expired, taking it off the timeline for good: its rows were never read
again and nothing could bring them back. Now the cleanup leaves it, `weir table check` reports it, and
`weir table repair --run` writes its completed file again, with a completion time that keeps the
order readers saw (after its files were written, before the later writes), so the table reads row
for row as before, at the latest snapshot and as of every instant."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.concurrency import begin_write, rollback_failed_writes
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
from lakecore.errors import InvalidInput, RollbackBlocked
from lakecore.layout import base_file_name, write_token
from lakecore.services.repair import check_table, exit_code, repair_lock, run_repair
from lakecore.table import AfterCommitOptions, WriterOptions
from lakecore.timeline import now_ms
from lakecore.timeline.store import clear_cache
from lakecore.write.markers import Marker, create_marker

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])
SHORT = HeartbeatConfig(interval_s=0.05, tolerable_misses=1)


def rows(ids: range | list[int], v: int) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids), pa.int64())})


def made(root: Path, table_type: str) -> tuple[Table, str]:
    """Three writes; the second's completed instant file is then lost. No ordering field: the order
    of completion decides which value of a key is read, so a wrong completion time shows."""
    uri = str(root / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", table_type=table_type, buckets=2)  # type: ignore[arg-type]
    t = Table.open(uri, options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))
    t.upsert(rows(range(0, 10), 1))
    lost = t.upsert(rows(range(0, 5), 2)).instant.requested_time
    t.upsert(rows([3, 4, 20], 3))
    return t, lost


def completed_file(t: Table, instant_time: str) -> Path:
    [name] = [n for n in os.listdir(Path(t.storage.uri.removeprefix("file://")) / ".weir/timeline")
              if n.startswith(instant_time + "_")]
    return Path(t.storage.uri.removeprefix("file://")) / ".weir/timeline" / name


def reads(t: Table) -> dict[str, list[dict]]:
    clear_cache()
    out = {"latest": sorted(t.read().to_pylist(), key=lambda r: r["id"])}
    for inst in t.timeline().completed:
        out[inst.requested_time] = sorted(t.read(as_of=inst.requested_time).to_pylist(),
                                          key=lambda r: r["id"])
    return out


def stats(body: dict) -> list[tuple]:
    return sorted((s["file"], s["kind"], s["records"], s["deletes"], s.get("base_instant"))
                  for s in body["write_stats"])


def data_files_of(t: Table, instant_time: str) -> list[str]:
    base = Path(t.storage.uri.removeprefix("file://"))
    return sorted(str(p) for p in base.rglob(f"*{instant_time}*") if ".weir" not in p.parts)


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_the_lazy_rollback_leaves_a_completed_write_whose_file_is_lost(tmp_path, table_type):
    t, lost = made(tmp_path, table_type)
    files = data_files_of(t, lost)
    assert files
    completed_file(t, lost).unlink()
    clear_cache()
    assert not t.timeline().find(lost).is_completed
    later = now_ms() + 600_000  # its heartbeat expired long ago
    assert rollback_failed_writes(t.storage, t.lock, SHORT, clock=lambda: later) == []
    clear_cache()
    still = t.timeline().find(lost)
    assert still is not None and not still.is_completed  # on the timeline still: repair can bring it back
    assert data_files_of(t, lost) == files
    # a write that died before writing a file is still rolled back, as before
    dead = begin_write(t.storage, t.config, t.lock, "upsert").instant.requested_time
    assert rollback_failed_writes(t.storage, t.lock, SHORT, clock=lambda: later) == [dead]


def test_a_file_written_while_the_cleanup_looks_is_not_taken_for_a_lost_commit(tmp_path, monkeypatch):
    """The cleanup lists a dead-looking write's markers (none yet), then the table's files; a stalled
    writer of it makes its first marker and file in between. The markers are listed again after the
    files, so the write is rolled back as a failed one (its new file with it), not kept as completed."""
    import lakecore.concurrency.rollback as rollback

    t, _ = made(tmp_path, "merge_on_read")
    dead = begin_write(t.storage, t.config, t.lock, "upsert").instant.requested_time
    path = base_file_name("f-late", write_token(), dead)
    real = rollback.data_files

    def files_after_a_late_write(storage):
        create_marker(storage, Marker(dead, path, "create"))  # marker first, as every writer does
        storage.write(path, b"written by a stalled writer")
        return real(storage)

    monkeypatch.setattr(rollback, "data_files", files_after_a_late_write)
    later = now_ms() + 600_000
    assert rollback_failed_writes(t.storage, t.lock, SHORT, clock=lambda: later) == [dead]
    assert not t.storage.exists(path)


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_check_reports_it_and_repair_writes_it_again_reading_as_before(tmp_path, table_type):
    t, lost = made(tmp_path, table_type)
    before = reads(t)
    original = completed_file(t, lost)
    body = json.loads(original.read_bytes())
    original.unlink()
    assert reads(t) != before  # not read while lost (copy-on-write: the later base holds its rows)

    [pending] = t.activity()["pending"]  # what `weir table describe` shows
    assert pending["instant"] == lost and pending["completed_file_lost"] and not pending["alive"]
    [problem] = check_table(t.storage)
    # a human decides: the same signs follow a crash that lost a failed write's markers
    assert (problem.kind, problem.instant, problem.repairable) == ("instant_lost", lost, False)
    assert "no markers" in problem.detail and "never completed" in problem.detail
    assert f"--complete-lost {lost}" in problem.remedy and "backup" in problem.remedy
    assert f"weir table rollback {t.storage.uri} {lost} --yes" in problem.remedy
    assert exit_code([problem]) == 3
    assert run_repair(t.storage, repair_lock(t.storage), dry_run=False).actions == ()   # not unless told
    with pytest.raises(InvalidInput, match="20990101000000000 is not a pending write whose completed"):
        run_repair(t.storage, repair_lock(t.storage), complete_lost=["20990101000000000"])
    plan = run_repair(t.storage, repair_lock(t.storage), complete_lost=[lost])
    assert [a.kind for a in plan.actions] == ["complete_lost_write"]
    assert not original.exists()  # a dry run writes nothing

    done = run_repair(t.storage, repair_lock(t.storage), dry_run=False, complete_lost=[lost])
    assert [a.kind for a in done.actions] == ["complete_lost_write"] and done.remaining == ()
    assert reads(t) == before  # row for row, latest and as of every instant: the later write still wins
    again = json.loads(completed_file(t, lost).read_bytes())
    assert "completion_time" in again["extra"]["rebuilt"]["guessed"]
    assert stats(again) == stats(body) and again["operation"] == body["operation"] == "upsert"
    assert check_table(t.storage) == ()
    assert t.upsert(rows([1], 9)).instant  # the table takes writes as before


def test_a_compaction_planned_while_it_looked_pending_does_not_hide_its_rows(tmp_path):
    """A compaction made while the write looked pending left its log files out: the completion time
    goes after that compaction's start, so the logs belong to the slice it began and are read."""
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", buckets=1)
    t = Table.open(uri, options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))
    t.upsert(rows(range(0, 10), 1))
    lost = t.upsert(rows(range(0, 3), 2)).instant.requested_time
    t.upsert(rows([7, 8], 3))  # other keys: the compaction merges this write, not the lost one
    before = sorted(t.read().to_pylist(), key=lambda r: r["id"])
    completed_file(t, lost).unlink()
    clear_cache()
    compaction = t.maintenance.compact()
    assert compaction is not None
    [problem] = check_table(t.storage)
    assert "--complete-lost" in problem.remedy, problem.remedy
    run_repair(t.storage, repair_lock(t.storage), dry_run=False, complete_lost=[lost])
    clear_cache()
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == before
    done = t.timeline().find(lost)
    compacted = [i for i in t.timeline().completed if i.action == "compaction"]
    assert compacted and done.completion_time > compacted[-1].requested_time


@pytest.mark.parametrize("killed", [False, True])
def test_a_write_repair_gives_up_is_still_rolled_back(tmp_path, monkeypatch, killed):
    """Repair quarantines a completed write one of whose files is missing, then rolls it back. It
    records the write as given up first, so the write, pending without markers from then on, is never
    taken for a lost completed one: a repair killed before its rollback leaves it to the lazy cleanup."""
    t, lost = made(tmp_path, "merge_on_read")
    victim = data_files_of(t, lost)[0]
    original = completed_file(t, lost)
    data = original.read_bytes()
    original.write_bytes(data[:data.index(b'"schema"')])  # truncated: its write stats name the lost file
    Path(victim).unlink()
    clear_cache()
    if killed:
        def die(*args, **kwargs):
            raise KeyboardInterrupt("killed before the rollback")

        monkeypatch.setattr("lakecore.services.repair.rollback_write", die)
        with pytest.raises(KeyboardInterrupt):
            run_repair(t.storage, repair_lock(t.storage), dry_run=False)
        later = now_ms() + 600_000
        assert rollback_failed_writes(t.storage, t.lock, SHORT, clock=lambda: later) == [lost]
    else:
        done = run_repair(t.storage, repair_lock(t.storage), dry_run=False)
        assert [a.kind for a in done.actions] == ["quarantine_instant"]
    clear_cache()
    assert t.timeline().find(lost) is None
    assert check_table(t.storage) == ()


def test_a_base_file_made_while_it_looked_pending_stops_the_repair(tmp_path):
    """A write that first made a file group lost its completed file; a later write then made that group
    anew without its rows. Completing it would show its rows in its other groups only: check says no
    completion time fits, and the repair refuses it, naming the later write."""
    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", table_type="copy_on_write", buckets=1)
    t = Table.open(uri, options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))
    lost = t.upsert(rows(range(0, 5), 1)).instant.requested_time   # makes the only file group
    completed_file(t, lost).unlink()
    clear_cache()
    later = t.upsert(rows([7], 2)).instant.requested_time   # the group looks empty: a new base
    [problem] = check_table(t.storage)
    assert problem.kind == "instant_lost" and f"write {later} wrote a new base file" in problem.remedy
    assert "--complete-lost" not in problem.remedy
    with pytest.raises(InvalidInput, match=f"write {later} wrote a new base file"):
        run_repair(t.storage, repair_lock(t.storage), dry_run=False, complete_lost=[lost])
    assert sorted(r["id"] for r in t.read().to_pylist()) == [7]   # nothing changed


def quiet(t: Table) -> Table:
    """The table opened again with a short heartbeat, after the writers' heartbeats expired."""
    time.sleep(3 * SHORT.timeout_ms / 1000)
    clear_cache()
    return Table.open(t.storage.uri, options=WriterOptions(heartbeat=SHORT,
                                                           after_commit=AfterCommitOptions(archival=None)))


def test_a_restore_refuses_to_drop_it_until_a_human_decides(tmp_path):
    """A restore rolls back every pending write before it undoes the later ones. It used to roll back
    the lost write with them, though the savepoint's state held its rows: restored to the latest
    instant, the table no longer read as before. It now refuses, dry run or not, and changes nothing;
    once the write is completed again, the restore reads as the savepoint did."""
    t, lost = made(tmp_path, "merge_on_read")
    savepointed = t.timeline().completed[-1].requested_time
    t.maintenance.savepoint(savepointed)
    before = reads(t)["latest"]
    completed_file(t, lost).unlink()
    t = quiet(t)
    timeline = sorted(os.listdir(Path(tmp_path / "t/.weir/timeline")))
    for dry_run in (True, False):
        with pytest.raises(RollbackBlocked, match=f"--complete-lost {lost}") as refused:
            t.maintenance.restore(savepointed, dry_run=dry_run)
        assert f"weir table rollback {t.storage.uri} {lost} --yes" in str(refused.value)
    assert sorted(os.listdir(Path(tmp_path / "t/.weir/timeline"))) == timeline   # nothing changed
    assert len(data_files_of(t, lost)) == 2
    run_repair(t.storage, repair_lock(t.storage), dry_run=False, complete_lost=[lost])
    t.upsert(rows([1, 2], 7))
    assert t.maintenance.restore(savepointed, dry_run=False).instant is not None
    assert reads(t)["latest"] == before


@pytest.mark.parametrize("killed", [None, "_execute", "mark_aborted"])
def test_rolled_back_by_name_it_is_dropped_with_its_files(tmp_path, monkeypatch, killed):
    """`weir table rollback T --yes`, the remedy for a write that did not complete, drops it: the dry run
    names its data files and the rollback deletes them, though no marker names them (they used to be
    left on storage, unread, for good). A rollback killed after its claim, or in it before the write's
    proof of death, is finished by the next writer's cleanup, which finds the files in the rollback's
    plan (written first: once the write is marked dead, its files no longer prove it completed). The
    clean's dry run does not list the write among the dead writes it would roll back: the lazy rollback
    leaves it alone."""
    t, lost = made(tmp_path, "merge_on_read")
    completed_file(t, lost).unlink()
    t = quiet(t)
    assert t.maintenance.clean(dry_run=True).plan is None
    files = data_files_of(t, lost)
    plan = t.maintenance.rollback(lost, dry_run=True).plan
    assert [str(tmp_path / "t" / f) for f in plan.files] == files and len(files) == 2
    if killed:
        import lakecore.concurrency.rollback as rollback

        real = getattr(rollback, killed)

        def die(*args, **kwargs):
            raise KeyboardInterrupt(f"killed at {killed}")

        monkeypatch.setattr(rollback, killed, die)
        with pytest.raises(KeyboardInterrupt):
            t.maintenance.rollback(lost, dry_run=False)
        monkeypatch.setattr(rollback, killed, real)
        assert data_files_of(t, lost) == files
        assert rollback_failed_writes(t.storage, t.lock, SHORT, clock=lambda: now_ms() + 600_000) == [lost]
    else:
        assert t.maintenance.rollback(lost, dry_run=False).instant is not None
    assert data_files_of(t, lost) == []
    clear_cache()
    assert t.timeline().find(lost) is None and check_table(t.storage) == ()
    [rb] = [i for i in t.timeline().completed if i.action == "rollback"]
    assert sorted(json.loads(completed_file(t, rb.requested_time).read_bytes())["extra"]["deleted_files"]) \
        == sorted(plan.files)
