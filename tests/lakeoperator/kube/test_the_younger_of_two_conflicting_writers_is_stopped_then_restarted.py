"""Batch writers on one file group of an optimistic table, held mid-write with their files and markers
written: the operator's supervisor sees the conflicts from outside and decides for them — the younger
writes lose to the oldest. The decision is in the writers' status, each loser's write is aborted (it can
never commit) and its driver stopped; with onConflict Restart the loser is resubmitted once the winner
has committed and ends Succeeded, with onConflict Abort it ends Aborted with the reason; a writer on
another file group, running all along, is never touched; the table holds what the surviving writes in
their order give."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lakecore import Table
from lakecore.concurrency.liveness.heartbeat import read_aborted
from tests.lakecore.concurrency.conflicts.test_occ_conflicts import keys_in_bucket
from tests.lakeoperator.kube.manifests import held_writer, reached, table, write_input
from tests.support.kube_server import ControlPlane
from tests.support.operator import Cluster, start_cluster, wait_until
from tests.support.scenario_checks import (
    check_aborted_on_conflict,
    check_conflict_decided,
    check_conflict_events,
    check_ran_once,
    check_restarted_after_conflict,
    check_rows,
)

pytestmark = [pytest.mark.k8s, pytest.mark.spark]


@pytest.fixture
def supervised(kube_server: ControlPlane, kube_namespace: str, tmp_path: Path) -> Iterator[Cluster]:
    yield from start_cluster(kube_server, kube_namespace, tmp_path, extra=("--conflict-grace", "3"))


def test_younger_writers_are_stopped_then_restarted_or_aborted_others_untouched(supervised: Cluster) -> None:
    cluster = supervised
    group_0, group_1 = keys_in_bucket(0, 30, buckets=2), keys_in_bucket(1, 5, buckets=2)
    older_rows = write_input(cluster.work, "older", group_0[:10], ts=1)
    younger_rows = write_input(cluster.work, "younger", group_0[5:15], ts=2)
    write_input(cluster.work, "hasty", group_0[20:30], ts=3)
    apart_rows = write_input(cluster.work, "apart", group_1, ts=1)
    cluster.apply(table(cluster.work, buckets=2))
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)

    older, older_pause = held_writer(cluster, "older", "older")
    cluster.apply(older)
    wait_until(lambda: reached(older_pause), timeout=120, show=lambda: cluster.operator.log()[-3000:])
    apart, apart_pause = held_writer(cluster, "apart", "apart")
    cluster.apply(apart)
    younger, younger_pause = held_writer(cluster, "younger", "younger")
    cluster.apply(younger)
    hasty, _ = held_writer(cluster, "hasty", "hasty", restartPolicy={"onConflict": "Abort"})
    cluster.apply(hasty)

    lost = cluster.wait_status("LakeWriter", "younger",
                               lambda s: (s.get("lastConflict") or {}).get("role") == "Lost", timeout=120)
    (older_instant,) = reached(older_pause)
    won = cluster.wait_status("LakeWriter", "older", lambda s: "lastConflict" in s,
                              timeout=10)   # right after the loser's (its other: the last one it beat)
    conflict = check_conflict_decided(lost["status"], won["status"], winner_instant=older_instant,
                                      winner_writer=f"{cluster.namespace}/older", loser_name="younger")
    lake = Table.open(str(cluster.work / "lake" / "orders"))
    record = wait_until(lambda: read_aborted(lake.storage, conflict["instant"]), timeout=10)  # after status
    assert record["other"] == older_instant and record["decided_by"] == "weir-operator"

    # the losers are stopped (by themselves, or their drivers deleted after the grace period): one waits
    # for the winner, the other is done
    cluster.wait_status("LakeWriter", "younger", lambda s: s.get("phase") == "BackingOff", timeout=60)
    aborted = cluster.wait_status("LakeWriter", "hasty", lambda s: s.get("phase") == "Aborted", timeout=60)
    check_aborted_on_conflict(aborted["status"], older_instant)
    wait_until(lambda: reached(apart_pause), timeout=120)
    (younger_pause / "hold").unlink()   # its next attempt runs straight through
    (older_pause / "hold").unlink()
    (apart_pause / "hold").unlink()
    done = cluster.wait_status("LakeWriter", "older", lambda s: s.get("phase") == "Succeeded", timeout=120)
    assert done["status"]["attempts"]["total"] == 1
    untouched = cluster.wait_status("LakeWriter", "apart", lambda s: s.get("phase") == "Succeeded",
                                    timeout=120)
    check_ran_once(untouched["status"])
    again = cluster.wait_status("LakeWriter", "younger", lambda s: s.get("phase") == "Succeeded", timeout=180)
    check_restarted_after_conflict(again["status"])

    completed = {i.requested_time: i for i in Table.open(str(lake.storage.uri)).timeline().completed}
    assert older_instant in completed
    (apart_instant,) = reached(apart_pause)
    restarted = [t for t, i in completed.items() if i.action == "deltacommit" and t not in (older_instant,
                                                                                             apart_instant)]
    assert len(restarted) == 1 and restarted[0] > completed[older_instant].completion_time  # after the winner

    got = Table.open(str(cluster.work / "lake" / "orders")).read().to_pylist()
    check_rows(got, older_rows, younger_rows, apart_rows)   # hasty's rows: never
    check_conflict_events(cluster.events("younger"), cluster.events("older"))
    metrics, ns = cluster.operator.metrics(), cluster.namespace
    for loser in ("younger", "hasty"):
        assert (f'weir_conflicts_total{{loser="{ns}/{loser}",namespace="{ns}",table="orders",'
                f'winner="{ns}/older"}} 1.0') in metrics
    assert f'weir_conflict_stop_seconds_count{{namespace="{ns}",table="orders"}} 2.0' in metrics
    assert (f'weir_restarts_total{{cause="conflict",kind="LakeWriter",namespace="{ns}",table="orders"}} 2.0'
            in metrics)
