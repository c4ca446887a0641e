"""A supervisor looking at every live write of a table finds the conflicts the commit check would
find, before the writers commit, always picking the younger write as the loser; it never finds one
between disjoint file groups, between non-blocking log appends, or with a dead write. Its abort is the
loser's proof of death, recorded under the table lock only while the loser is still pending."""

from __future__ import annotations

import pytest

from lakecore import Table
from lakecore.concurrency.conflicts.outside import abort_loser, find_outside_conflicts, live_writes
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig, mark_aborted, read_aborted
from lakecore.concurrency.transaction import commit_write
from lakecore.errors import InvalidInstantState, WriteConflict
from lakecore.layout import bucket_file_id
from tests.lakecore.concurrency.conflicts.test_occ_conflicts import SCHEMA, keys_in_bucket, start

HB = HeartbeatConfig(interval_s=10.0, tolerable_misses=3)


def conflicts(t: Table):
    return find_outside_conflicts(t.storage, t.config.concurrency_mode, HB)


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_two_live_writes_on_one_file_group_the_younger_loses(tmp_path, table_type):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", table_type=table_type)
    shared = keys_in_bucket(2, 6)
    older = start(t, shared[:3] + keys_in_bucket(3, 2), "older")
    younger = start(t, shared[3:] + keys_in_bucket(0, 2), "younger")
    (c,) = conflicts(t)
    assert (c.loser, c.winner) == (younger[0].instant.requested_time, older[0].instant.requested_time)
    assert c.file_groups == {("", bucket_file_id(2))} and c.winner_completed is None
    assert c.marker_at_ms > 0 and older[0].instant.requested_time in c.describe()

    assert abort_loser(t.storage, t.lock, c, "weir-operator")
    record = read_aborted(t.storage, c.loser)
    assert record is not None and record["other"] == c.winner and record["reason"] == "conflict"
    assert record["file_groups"] == [["", bucket_file_id(2)]]
    assert conflicts(t) == []  # the loser is dead: nothing left to decide
    with pytest.raises((WriteConflict, InvalidInstantState)):  # fencing: the loser can never complete
        commit_write(*younger, lock=t.lock)
    commit_write(*older, lock=t.lock)
    assert {r["v"] for r in t.read().to_pylist()} == {"older"}


def test_a_live_write_on_a_group_completed_since_it_started_loses_to_the_completed_one(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    shared = keys_in_bucket(1, 4)
    older = start(t, shared[:2], "older")
    younger = start(t, shared[2:], "younger")
    commit_write(*younger, lock=t.lock)   # the younger committed first: it is the winner now
    (c,) = conflicts(t)
    assert (c.loser, c.winner) == (older[0].instant.requested_time, younger[0].instant.requested_time)
    assert c.winner_completed is not None


def test_disjoint_groups_non_blocking_appends_and_dead_writes_never_conflict(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    start(t, keys_in_bucket(0, 3), "a")
    start(t, keys_in_bucket(1, 3), "b")
    assert conflicts(t) == [] and len(live_writes(t.storage, t.timeline(), HB)) == 2

    nb = Table.create(str(tmp_path / "nb"), schema=SCHEMA, record_key="id", ordering_field="ts",
                      concurrency_mode="non_blocking")
    commit_write(*start(nb, keys_in_bucket(1, 4), "base"), lock=nb.lock)  # later writes append logs
    start(nb, keys_in_bucket(1, 4), "a")
    start(nb, keys_in_bucket(1, 4), "b")
    assert find_outside_conflicts(nb.storage, "non_blocking", HB) == []

    d = Table.create(str(tmp_path / "d"), schema=SCHEMA, record_key="id")
    dead = start(d, keys_in_bucket(2, 3), "dead")
    mark_aborted(d.storage, dead[0].instant.requested_time, "test", 0)
    start(d, keys_in_bucket(2, 3), "live")
    assert conflicts(d) == []


def test_a_loser_that_committed_first_is_not_aborted(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    shared = keys_in_bucket(2, 4)
    start(t, shared[:2], "older")
    younger = start(t, shared[2:], "younger")
    (c,) = conflicts(t)
    commit_write(*younger, lock=t.lock)  # between the scan and the decision
    assert not abort_loser(t.storage, t.lock, c, "weir-operator")
    assert read_aborted(t.storage, c.loser) is None


def test_a_write_that_lost_in_the_same_scan_makes_no_younger_write_lose(tmp_path):
    """An older live write that loses to a completed one will never commit: a younger write on the
    same file group must not be stopped for its sake (it would commit, the older one cannot)."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    keys = keys_in_bucket(1, 6)
    doomed = start(t, keys[:2], "doomed")
    commit_write(*start(t, keys[2:4], "winner"), lock=t.lock)   # completed after `doomed` began
    younger = start(t, keys[4:], "younger")                     # began after that commit
    (c,) = conflicts(t)
    assert c.loser == doomed[0].instant.requested_time and c.winner_completed is not None
    assert abort_loser(t.storage, t.lock, c, "weir-operator")
    commit_write(*younger, lock=t.lock)   # what the supervisor spared commits
    assert {r["v"] for r in t.read().to_pylist()} == {"winner", "younger"}


def test_a_loser_to_an_older_live_write_makes_no_younger_write_lose(tmp_path):
    """A chain: B loses to the older A on one file group; C, younger, shares another group with B
    only. B will never commit, so C is not stopped for it."""
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    one, two = keys_in_bucket(1, 4), keys_in_bucket(2, 4)
    a = start(t, one[:2], "a")
    b = start(t, one[2:] + two[:2], "b")
    c = start(t, two[2:], "c")
    (decided,) = conflicts(t)
    assert (decided.loser, decided.winner) == (b[0].instant.requested_time, a[0].instant.requested_time)
    assert abort_loser(t.storage, t.lock, decided, "weir-operator")
    commit_write(*a, lock=t.lock)
    commit_write(*c, lock=t.lock)
    assert {r["v"] for r in t.read().to_pylist()} == {"a", "c"}
