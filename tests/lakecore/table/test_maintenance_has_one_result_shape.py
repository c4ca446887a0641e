"""A table's maintenance is reached in one place, `table.maintenance`, and every operation returns one
`MaintenanceResult` (a plan, the instant that recorded what was done, or nothing to do). What deletes
data (clean, rollback, restore) is a dry run unless told; the old `Table` methods still work for one
release, warn, and return what they returned before."""

from __future__ import annotations

import inspect
import os

import pyarrow as pa
import pytest

from lakecore import (
    ArchivalPolicy,
    CleanPolicy,
    ClusteringStrategy,
    MaintenanceResult,
    Table,
    WriterOptions,
)
from lakecore.services import (
    ArchivalPlan,
    ArchivalResult,
    CleanPlan,
    ClusteringPlan,
    CompactionPlan,
    Savepoint,
    UndoPlan,
)
from lakecore.table import AfterCommitOptions, Maintenance
from lakecore.table.maintenance import DELETES_DATA
from lakecore.timeline import Instant

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
ACTIONS = {"compact": "compaction", "cluster": "clustering", "clean": "clean", "archive": "archival",
           "rollback": "rollback", "restore": "restore", "savepoint": "savepoint"}


def table(tmp_path, writes: int = 4) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", buckets=1,
                     options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))
    for n in range(writes):
        t.upsert(pa.table({"id": [1, 2], "v": [f"v{n}", f"w{n}"]}, schema=SCHEMA))
    return t


def files(t: Table) -> set[str]:
    root = t.uri.removeprefix("file://")
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
            if ".weir" not in d}


def test_the_dry_run_rule_is_what_deletes_data_is_a_dry_run_unless_told() -> None:
    for method, action in ACTIONS.items():
        default = inspect.signature(getattr(Maintenance, method)).parameters["dry_run"].default
        assert default is (action in DELETES_DATA), method
    assert {"clean", "rollback", "restore"} == DELETES_DATA


def test_deleting_operations_change_nothing_unless_told(tmp_path) -> None:
    t = table(tmp_path)
    t.maintenance.compact()
    last = t.upsert(pa.table({"id": [3], "v": ["z"]}, schema=SCHEMA)).instant
    sp = t.maintenance.savepoint(t.timeline().completed[0].requested_time).instant
    assert sp is not None
    before, timeline = files(t), [str(i) for i in t.timeline().instants]
    clean = t.maintenance.clean(CleanPolicy("keep_latest_file_versions", 1))
    rollback = t.maintenance.rollback(last.requested_time)
    restore = t.maintenance.restore(sp.requested_time)
    assert (files(t), [str(i) for i in t.timeline().instants]) == (before, timeline)
    assert isinstance(clean.plan, CleanPlan) and clean.dry_run and clean.instant is None
    assert isinstance(rollback.plan, UndoPlan) and rollback.plan.files and rollback.instant is None
    assert isinstance(restore.plan, UndoPlan) and restore.plan.undone and restore.instant is None


def test_every_operation_returns_one_result_shape(tmp_path) -> None:
    t = table(tmp_path)
    planned = t.maintenance.compact(dry_run=True)
    assert isinstance(planned.plan, CompactionPlan) and planned.instant is None and not planned.done
    done = t.maintenance.compact()
    assert done.action == "compaction" and done.instant is not None and done.instant.action == "compaction"
    assert isinstance(done.plan, CompactionPlan) and done.done
    assert t.maintenance.compact().nothing_to_do

    clustered = t.maintenance.cluster(ClusteringStrategy("all"))
    assert isinstance(clustered.plan, ClusteringPlan) and clustered.instant is not None
    assert clustered.instant.action == "replacecommit"

    cleaned = t.maintenance.clean(CleanPolicy("keep_latest_file_versions", 1), dry_run=False)
    assert cleaned.instant is not None and cleaned.instant.action == "clean" and not cleaned.dry_run
    assert t.commit_metadata(cleaned.instant).extra["deleted"]

    point = t.upsert(pa.table({"id": [2], "v": ["p"]}, schema=SCHEMA)).instant.requested_time
    pinned = t.maintenance.savepoint(point, dry_run=True)
    assert isinstance(pinned.plan, Savepoint) and pinned.instant is None
    sp = t.maintenance.savepoint(point)
    assert sp.instant is not None and sp.instant.action == "savepoint"

    late = t.upsert(pa.table({"id": [3], "v": ["z"]}, schema=SCHEMA)).instant
    undone = t.maintenance.rollback(late.requested_time, dry_run=False)
    assert undone.instant is not None and undone.instant.action == "rollback" and undone.plan is None
    again = t.maintenance.rollback(late.requested_time)  # rolled back already: its rollback, done
    assert again.done and again.instant == undone.instant

    t.upsert(pa.table({"id": [4], "v": ["y"]}, schema=SCHEMA))
    restored = t.maintenance.restore(sp.instant.requested_time, dry_run=False)
    assert restored.instant is not None and restored.instant.action == "restore"

    for n in range(3):
        t.upsert(pa.table({"id": [5 + n], "v": ["a"]}, schema=SCHEMA))
    policy = ArchivalPolicy(min_instants=2, max_instants=3)
    due = t.maintenance.archive(policy, dry_run=True)
    assert isinstance(due.plan, ArchivalPlan) and due.plan.instants and not due.nothing_to_do
    archived = t.maintenance.archive(policy)
    assert isinstance(archived.archived, ArchivalResult) and archived.done and archived.instant is None
    empty = t.maintenance.archive(policy, dry_run=True)
    assert isinstance(empty.plan, ArchivalPlan) and empty.nothing_to_do


def test_the_old_methods_warn_and_return_their_old_shapes(tmp_path) -> None:
    t = table(tmp_path)
    with pytest.deprecated_call(match=r"table\.maintenance\.compact"):
        plan = t.compact(dry_run=True)
    assert isinstance(plan, CompactionPlan)
    with pytest.deprecated_call():
        done = t.compact()
    assert isinstance(done, Instant) and done.action == "compaction"
    with pytest.deprecated_call():
        assert t.compact() is None
    with pytest.deprecated_call():
        assert isinstance(t.cluster(ClusteringStrategy("all"), dry_run=True), ClusteringPlan)
    with pytest.deprecated_call():
        assert isinstance(t.clean(CleanPolicy("keep_latest_file_versions", 1)), CleanPlan)
    tiny = ArchivalPolicy(min_instants=1, max_instants=2)
    with pytest.deprecated_call():
        assert isinstance(t.archive(tiny, dry_run=True), ArchivalPlan)
    with pytest.deprecated_call():
        assert isinstance(t.archive(tiny), ArchivalResult)
    last = t.upsert(pa.table({"id": [3], "v": ["z"]}, schema=SCHEMA)).instant.requested_time
    with pytest.deprecated_call():
        assert isinstance(t.rollback(last), UndoPlan)
    with pytest.deprecated_call():
        assert isinstance(t.rollback(last, dry_run=False), Instant)
    point = t.upsert(pa.table({"id": [4], "v": ["y"]}, schema=SCHEMA)).instant.requested_time
    with pytest.deprecated_call():
        assert isinstance(t.savepoint(point, dry_run=True), Savepoint)
    with pytest.deprecated_call():
        sp = t.savepoint(point)
    assert isinstance(sp, Instant)
    with pytest.deprecated_call():
        assert isinstance(t.restore(sp.requested_time), UndoPlan)


def test_the_result_is_exported_by_the_root() -> None:
    assert MaintenanceResult.__module__ == "lakecore.table.maintenance"


def test_an_instant_is_taken_as_the_instant_or_its_time_alike(tmp_path) -> None:
    """What `upsert` and `timeline()` hand out (an Instant) and what `weir table timeline` prints (its
    requested time) name the same instant wherever one is asked for."""
    t = table(tmp_path, writes=3)
    first, second, third = t.timeline().completed
    assert t.commit_metadata(second.requested_time) == t.commit_metadata(second)
    pinned = t.maintenance.savepoint(first, dry_run=True)
    assert pinned.plan is not None
    assert pinned.plan == t.maintenance.savepoint(first.requested_time, dry_run=True).plan
    undo = t.maintenance.rollback(third).plan
    assert undo is not None and undo == t.maintenance.rollback(third.requested_time).plan
    t.maintenance.savepoint(first)
    back = t.maintenance.restore(first).plan
    assert back is not None and back == t.maintenance.restore(first.requested_time).plan
    with pytest.raises(TypeError, match=r"an instant is an Instant or its requested time \(a str of 17 "
                                        r"digits\), not int"):
        t.maintenance.rollback(int(third.requested_time))  # type: ignore[arg-type]
    from lakecore.errors import InstantNotFound

    with pytest.raises(InstantNotFound, match="no instant 20000101000000000 on the timeline"):
        t.commit_metadata("20000101000000000")


def test_the_arguments_a_user_would_write_are_taken_or_told(tmp_path) -> None:
    """A schema as a mapping, one partition field or column as a str, a strategy by its kind's name: taken
    as meant (they raised AttributeError, or were read letter by letter); a misspelt query is told, not
    read as the snapshot."""
    from lakecore.errors import InvalidCompactionStrategy, InvalidInput, InvalidTableConfig

    t = Table.create(str(tmp_path / "m"), schema={"id": "int64", "v": pa.string(), "dt": "date32"},
                     record_key="id", partition_fields="dt", buckets=1)
    assert [(f.name, f.type) for f in t.config.schema] == [("id", pa.int64()), ("v", pa.string()),
                                                           ("dt", pa.date32())]
    assert t.config.partition_fields == ("dt",)
    with pytest.raises(InvalidTableConfig, match=r"unknown type 'long' for column 'id' \(did you mean "
                                                 r"int64\?\)"):
        Table.create(str(tmp_path / "n"), schema={"id": "long"}, record_key="id")
    with pytest.raises(InvalidTableConfig, match=r"schema is a pyarrow\.Schema or a mapping"):
        Table.create(str(tmp_path / "n"), schema="id:int64", record_key="id")  # type: ignore[arg-type]
    u = table(tmp_path)
    assert u.read(columns="v").column_names == ["v"]
    with pytest.raises(InvalidInput, match=r"query 'ro' is not one of snapshot, read_optimized"):
        u.read(query="ro")  # type: ignore[arg-type]
    assert u.read(as_of=u.timeline().completed[0]).num_rows == 2
    assert u.maintenance.compact("log_count", dry_run=True).action == "compaction"
    assert u.maintenance.clean("keep_latest_commits").action == "clean"
    assert u.maintenance.cluster("all", dry_run=True).action == "clustering"
    with pytest.raises(InvalidCompactionStrategy, match="unknown compaction strategy 'al'"):
        u.maintenance.compact("al")
    with pytest.raises(TypeError, match="strategy is a CompactionStrategy"):
        u.maintenance.compact(3)  # type: ignore[arg-type]
