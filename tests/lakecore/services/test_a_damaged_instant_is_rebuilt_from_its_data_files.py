"""A completed instant file truncated or garbled on disk is rebuilt from what survives: its data files
(their footers and op columns), its plan, the bytes the damage left, and what other instants say of
its files. Every kind of instant a table's history holds (writes of each operation, compaction,
clustering, clean, savepoint, the rollbacks of a pending and of a completed write), on both table
types, newest and older: after `repair --run` the table reads row for row as before the damage, at
the latest snapshot and as of every instant, and the rebuilt body says what the original said (the
write stats, schema, operation and table config; what it cannot know is listed under
`extra.rebuilt`). A write one of whose files is missing too is rolled back instead, with a warning
that says what is lost, and its other files stay on storage."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.concurrency import begin_write
from lakecore.services import CleanPolicy, ClusteringStrategy
from lakecore.services.repair import check_table, exit_code, repair_lock, run_repair
from lakecore.table import AfterCommitOptions, WriterOptions
from lakecore.timeline.history_store import clear_history_cache
from lakecore.timeline.store import clear_cache

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])


def batch(ids: range | list[int], ts: int) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "dt": pa.array(["a" if i % 3 else "b" for i in ids]),
                     "v": pa.array([i * 1.5 + ts for i in ids], pa.float64())})


def history(uri: str, table_type: str) -> Table:
    """A table whose timeline holds every kind of completed instant."""
    Table.create(uri, schema=SCHEMA, record_key="id", partition_fields=["dt"], ordering_field="ts",
                 buckets=2, table_type=table_type)  # type: ignore[arg-type]
    t = Table.open(uri, options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))
    t.upsert(batch(range(0, 30), 1), extra={"writer": "ns/loader"})
    t.upsert(batch(range(20, 40), 2))
    t.delete(batch([0, 1, 2, 21], 2).select(["id", "dt"]))
    if table_type == "merge_on_read":
        t.maintenance.compact()
    t.insert_overwrite(batch([102, 105, 108], 3))  # replaces partition dt=b
    t.upsert(batch(range(30, 45), 4))
    t.maintenance.cluster(ClusteringStrategy("all", ("v",)))
    t.maintenance.clean(CleanPolicy("keep_latest_commits", 2), dry_run=False)
    written = t.upsert(batch(range(200, 210), 5))
    t.maintenance.savepoint(written.instant.requested_time, comment="before the late batch")
    pending = begin_write(t.storage, t.config, t.lock, "upsert")  # a writer that dies: rolled back
    t.maintenance.rollback(pending.instant.requested_time, dry_run=False, force=True)
    late = t.upsert(batch(range(300, 305), 6))
    t.maintenance.rollback(late.instant.requested_time, dry_run=False)  # undone on purpose
    t.upsert(batch(range(40, 50), 7))
    return t


@pytest.fixture(scope="module", params=["merge_on_read", "copy_on_write"])
def built(request, tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp(request.param)
    history(str(root / "t"), request.param)
    return str(root / "t")


def forget() -> None:
    clear_cache()
    clear_history_cache()


def reads(t: Table) -> dict[str, list[dict]]:
    """The latest snapshot and the table as of every completed instant (or the error a point gives)."""
    out = {"latest": sorted(t.read().to_pylist(), key=lambda r: r["id"])}
    for inst in t.timeline().completed:
        try:
            out[inst.requested_time] = sorted(t.read(as_of=inst.requested_time).to_pylist(),
                                              key=lambda r: r["id"])
        except Exception as exc:
            out[inst.requested_time] = [{"error": type(exc).__name__}]
    return out


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[:10])
    elif how == "cut":
        path.write_bytes(data[: len(data) * 6 // 10])
    else:
        path.write_bytes(data[:12] + b"\x00#garbled#\x00" + data[40:])


def instants_of(uri: str) -> list[str]:
    return [i.file_name for i in Table.open(uri).timeline().completed]


@pytest.mark.parametrize("how", ["truncated", "cut", "garbled"])
def test_every_completed_instant_is_rebuilt_and_the_table_reads_as_before(built, tmp_path, how):
    for index, name in enumerate(instants_of(built)):
        uri = str(tmp_path / f"{how}-{index}")
        shutil.copytree(built, uri)
        forget()
        t = Table.open(uri)
        before = reads(t)
        path = Path(uri, ".weir", "timeline", name)
        original = json.loads(path.read_bytes())
        damage(path, how)
        forget()
        problems = check_table(t.storage)
        assert [p.kind for p in problems] == ["instant_corrupt"], (name, problems)
        assert exit_code(problems) == 2

        report = run_repair(t.storage, repair_lock(t.storage), dry_run=False)
        forget()
        action = report.actions[0]
        if name.endswith(".savepoint") and how == "truncated":  # which instant it pinned is gone
            assert action.kind == "quarantine_instant", action
            continue
        assert action.kind == "rebuild_instant" and not report.remaining, (name, report)
        assert reads(Table.open(uri)) == before, name
        rebuilt = json.loads(path.read_bytes())
        same_as_original(original, rebuilt, name)
        kept = os.listdir(Path(uri, ".weir", "quarantine"))
        assert [k for k in kept if k.endswith(name)], "the damaged bytes are kept"


def same_as_original(original: dict, rebuilt: dict, name: str) -> None:
    """Everything the original said, except what `extra.rebuilt` names as guessed or lost."""
    marks = rebuilt["extra"]["rebuilt"]
    if "operation" not in marks["guessed"]:
        assert rebuilt["operation"] == original["operation"], name
    def path(s: dict) -> tuple[str, str]:
        return s["partition"], s["file"]

    cleaned = {path(s) for s in rebuilt["write_stats"] if s["bytes"] == 0 and s["records"] == 0}
    assert sorted((s for s in rebuilt["write_stats"] if path(s) not in cleaned), key=path) == \
        sorted((s for s in original["write_stats"] if path(s) not in cleaned), key=path), name
    assert {path(s) for s in rebuilt["write_stats"]} == {path(s) for s in original["write_stats"]}, name
    assert rebuilt["schema"] == original["schema"], name
    assert rebuilt.get("table") == original.get("table"), name
    for key, value in original["extra"].items():
        lost = ("extra" in marks["lost"] and key not in ("overwrite",)) or key in marks["lost"]
        assert lost or rebuilt["extra"][key] == value, (name, key)


def test_a_write_with_a_missing_data_file_is_rolled_back_with_a_warning(tmp_path):
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=4)
    t.upsert(batch(range(0, 20), 1))
    t.upsert(batch(range(20, 40), 2))
    earlier = sorted(t.read().to_pylist(), key=lambda r: r["id"])
    newest = t.upsert(batch(range(40, 60), 3)).instant
    stats = t.commit_metadata(newest).write_stats
    path = Path(uri, ".weir", "timeline", newest.file_name)
    cut = path.read_bytes()[: len(path.read_bytes()) * 6 // 10]
    assert stats[0].file_name.encode() in cut, "the bytes that survive name the first file"
    path.write_bytes(cut)
    os.remove(Path(uri, stats[0].path))
    forget()

    [problem] = check_table(t.storage)
    assert problem.kind == "instant_corrupt" and stats[0].file_name in problem.remedy
    assert problem.remedy.startswith("restore the missing data file(s)"), "what keeps the rows comes first"
    plan = run_repair(t.storage, repair_lock(t.storage))
    [action] = plan.actions
    assert action.kind == "quarantine_instant" and "would be rolled back" in action.warning
    assert "restore the missing file(s) from a backup first" in action.warning

    done = run_repair(t.storage, repair_lock(t.storage), dry_run=False)
    forget()
    [action] = done.actions
    assert "is rolled back: its rows are no longer read" in action.warning
    assert stats[0].file_name in action.warning
    assert not done.remaining
    assert sorted(Table.open(uri).read().to_pylist(), key=lambda r: r["id"]) == earlier
    for s in stats[1:]:
        assert Path(uri, s.path).exists(), "the write's other files stay on storage"
