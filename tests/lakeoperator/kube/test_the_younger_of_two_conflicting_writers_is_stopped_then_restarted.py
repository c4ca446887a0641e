"""Two batch writers on one file group of an optimistic table, both held mid-write with their files
and markers written: the operator's supervisor sees the conflict from outside and decides for them —
the younger loses. The decision is in both writers' status, the loser's write is aborted (it can never
commit) and its driver stopped; with onConflict Restart the loser is resubmitted once the winner has
committed, both end Succeeded, and the table holds what the two writes in that order give."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakecore import Table
from lakecore.write.heartbeat import read_aborted
from tests.lakeoperator.kube.manifests import batch_writer, table, write_input
from tests.support.kube_api import KubeApi
from tests.support.operator import Cluster, start_cluster, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.spark]


@pytest.fixture
def supervised(kube_api: KubeApi, tmp_path: Path) -> Iterator[Cluster]:
    yield from start_cluster(kube_api, tmp_path, extra=("--conflict-grace", "3"))


def held_writer(cluster: Cluster, name: str, source: str, **spec: Any) -> tuple[dict[str, Any], Path]:
    """A writer whose tasks hold (files and markers written) while <pause>/hold exists."""
    pause = cluster.work / f"pause-{name}"
    pause.mkdir()
    (pause / "hold").touch()
    body = batch_writer(cluster.work, name, source=source, **spec)
    body["spec"]["spark"]["conf"] = {"spark.executorEnv.WEIR_TEST_PAUSE_DIR": str(pause)}
    return body, pause


def reached(pause: Path) -> list[str]:
    return [p.name.removeprefix("reached-") for p in pause.glob("reached-*")]


def test_the_younger_writer_is_stopped_and_restarts_after_the_older_commits(supervised: Cluster) -> None:
    cluster = supervised
    older_rows = write_input(cluster.work, "older", range(0, 10), ts=1)
    younger_rows = write_input(cluster.work, "younger", range(5, 15), ts=2)
    cluster.apply(table(cluster.work))
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)

    older, older_pause = held_writer(cluster, "older", "older")
    cluster.apply(older)
    wait_until(lambda: reached(older_pause), timeout=120, show=lambda: cluster.operator.log()[-3000:])
    younger, younger_pause = held_writer(cluster, "younger", "younger")
    cluster.apply(younger)

    lost = cluster.wait_status("LakeWriter", "younger",
                               lambda s: (s.get("lastConflict") or {}).get("role") == "Lost", timeout=120)
    conflict = lost["status"]["lastConflict"]
    (older_instant,) = reached(older_pause)
    assert conflict["other"] == older_instant and conflict["otherWriter"] == "default/older"
    assert conflict["fileGroups"] and conflict["submission"].startswith("younger-1-")
    won = cluster.wait_status("LakeWriter", "older", lambda s: "lastConflict" in s,
                              timeout=10)["status"]["lastConflict"]   # written right after the loser's
    assert won["role"] == "Won" and won["other"] == conflict["instant"]
    lake = Table.open(str(cluster.work / "lake" / "orders"))
    record = wait_until(lambda: read_aborted(lake.storage, conflict["instant"]), timeout=10)  # after status
    assert record["other"] == older_instant and record["decided_by"] == "weir-operator"

    # the loser is stopped (by itself, or its driver deleted after the grace period) and waits for the winner
    cluster.wait_status("LakeWriter", "younger", lambda s: s.get("phase") == "BackingOff", timeout=60)
    (younger_pause / "hold").unlink()   # its next attempt runs straight through
    (older_pause / "hold").unlink()
    done = cluster.wait_status("LakeWriter", "older", lambda s: s.get("phase") == "Succeeded", timeout=120)
    assert done["status"]["attempts"]["total"] == 1
    again = cluster.wait_status("LakeWriter", "younger", lambda s: s.get("phase") == "Succeeded", timeout=180)
    history = again["status"]["history"]
    assert [h["cause"] for h in history] == ["conflict", "success"]

    completed = {i.requested_time: i for i in Table.open(str(lake.storage.uri)).timeline().completed}
    assert older_instant in completed
    restarted = [t for t, i in completed.items() if i.action == "deltacommit" and t != older_instant]
    assert len(restarted) == 1 and restarted[0] > completed[older_instant].completion_time  # after the winner

    expected = {r["id"]: r for r in older_rows} | {r["id"]: r for r in younger_rows}
    got = Table.open(str(cluster.work / "lake" / "orders")).read().to_pylist()
    assert sorted(got, key=lambda r: r["id"]) == [expected[k] for k in sorted(expected)]

    assert "ConflictLost" in [e["reason"] for e in cluster.events("younger")]
    assert "ConflictWon" in [e["reason"] for e in cluster.events("older")]
    metrics = cluster.operator.metrics()
    assert ('weir_conflicts_total{loser="default/younger",namespace="default",table="orders",'
            'winner="default/older"} 1.0') in metrics
    assert 'weir_restarts_total{cause="conflict",kind="LakeWriter",namespace="default",table="orders"} 1.0' \
        in metrics
