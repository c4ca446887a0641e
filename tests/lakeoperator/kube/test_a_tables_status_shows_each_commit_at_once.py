"""The real operator keeps a LakeTable's status as current as its timeline, within seconds, not at the
table's periodic refresh (60 s): after a writer's driver succeeds, and after commits the supervisor
sees (here: writes from outside the operator, a younger one completing before an older one), the
status says the latest completed instant by completion time, and `latestInstantTime` never goes back."""

from __future__ import annotations

import time

import pytest

from lakecore import Table
from tests.lakecore.concurrency.conflicts.test_occ_conflicts import keys_in_bucket
from tests.lakeoperator.kube.manifests import batch_writer, table, write_input
from tests.lakeoperator.test_weir_run_shows_each_commit_in_the_tables_status import (
    latest_in_order,
    newest,
    start_write,
)
from tests.support.operator import Cluster

pytestmark = pytest.mark.k8s
AT_ONCE_S = 5     # well under the table's 60 s refresh: only a refresh on the commit meets it


def shows(cluster: Cluster, instant: str) -> dict:
    return cluster.wait_status("LakeTable", "orders", lambda s: s.get("latestInstant") == instant,
                               timeout=AT_ONCE_S)["status"]


@pytest.mark.spark
def test_a_writers_commit_shows_in_its_tables_status_at_once(cluster: Cluster) -> None:
    write_input(cluster.work)
    cluster.apply(table(cluster.work))
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)
    cluster.apply(batch_writer(cluster.work))
    cluster.wait_status("LakeWriter", "orders-load", lambda s: s.get("phase") == "Succeeded", timeout=240)
    committed, _ = newest(str(cluster.work / "lake" / "orders"))
    status = shows(cluster, committed)
    assert status["activeWriters"] == 0 and status["phase"] == "Ready"


def passes(cluster: Cluster, kind: str) -> float:
    """Reconcile passes of `kind` the operator made so far (its metrics)."""
    line = f'weir_reconcile_duration_seconds_count{{kind="{kind}",outcome="ok"}} '
    return next((float(m.removeprefix(line)) for m in cluster.operator.metrics().splitlines()
                 if m.startswith(line)), 0.0)


def test_commits_seen_show_in_completion_order_and_never_go_back(cluster: Cluster) -> None:
    location = str(cluster.work / "lake" / "orders")
    cluster.apply(table(cluster.work, buckets=4))
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)
    writer = batch_writer(cluster.work)    # a writer of the table (paused: no pod), to count its passes
    writer["metadata"]["annotations"] = {"weir.dev/paused": "true"}
    cluster.apply(writer)
    cluster.wait_status("LakeWriter", "orders-load", lambda s: any(
        c["type"] == "ReconciliationPaused" and c["status"] == "True" for c in s.get("conditions") or ()))
    time.sleep(2)                          # its pass after its own status write, the table's first scan
    before = {kind: passes(cluster, kind) for kind in ("LakeTable", "LakeWriter")}

    older, older_stats = start_write(location, keys_in_bucket(0, 3))
    younger, younger_stats = start_write(location, keys_in_bucket(1, 3))
    seen = []
    younger.commit(younger_stats)
    seen.append(shows(cluster, younger.instant.requested_time))
    older.commit(older_stats)
    seen.append(shows(cluster, older.instant.requested_time))
    assert newest(location)[0] == older.instant.requested_time
    version = cluster.get("LakeTable", "orders")["metadata"]["resourceVersion"]
    time.sleep(3)                          # more scans: the status stays, and is not written again
    now = cluster.get("LakeTable", "orders")
    assert now["metadata"]["resourceVersion"] == version
    seen.append(now["status"])
    assert seen[-1]["latestInstant"] == older.instant.requested_time
    latest_in_order(seen)
    assert Table.open(location).read().num_rows == 6
    # a commit is one pass of its table; its writers, who do not read the timeline's fields, are left be
    assert passes(cluster, "LakeTable") - before["LakeTable"] <= 2
    assert passes(cluster, "LakeWriter") == before["LakeWriter"]
