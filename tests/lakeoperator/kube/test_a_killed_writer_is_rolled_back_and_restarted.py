"""kill -9 a writer's driver mid-write (its files and markers written, its instant pending): the
operator sees the attempt end (an infrastructure failure) and restarts the writer; its supervisor sees
the instant's heartbeat expire and rolls it back (the files it had written are deleted, a rollback
instant records it); the restarted attempt completes and the table holds the input once."""

from __future__ import annotations

import pytest

from lakecore import Table
from tests.lakeoperator.kube.manifests import held_writer, reached, table, write_input
from tests.support.operator import Cluster, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.spark]


def test_a_killed_writer_is_rolled_back_by_the_supervisor_and_restarted(cluster: Cluster) -> None:
    rows = write_input(cluster.work)
    cluster.apply(table(cluster.work, heartbeat={"intervalSeconds": 1, "tolerableMisses": 3}))
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)
    body, pause = held_writer(cluster, "orders-load", "orders")
    cluster.apply(body)
    wait_until(lambda: reached(pause), timeout=120, show=lambda: cluster.operator.log()[-3000:])
    (killed,) = reached(pause)
    first = cluster.get("LakeWriter", "orders-load")["status"]
    assert first.get("currentInstant") in (None, killed)   # reported once the supervisor scanned it
    cluster.kill_driver(first["submissionId"])

    lake = Table.open(str(cluster.work / "lake" / "orders"))

    def rolled_back() -> bool:
        timeline = lake.timeline()
        return killed not in {i.requested_time for i in timeline.pending} and \
            any(i.action == "rollback" for i in timeline.completed)

    wait_until(rolled_back, timeout=60, show=lambda: cluster.operator.log()[-3000:])
    (pause / "hold").unlink()
    done = cluster.wait_status("LakeWriter", "orders-load", lambda s: s.get("phase") == "Succeeded",
                               timeout=180)
    assert [h["cause"] for h in done["status"]["history"]] == ["infrastructure", "success"]
    got = sorted(Table.open(lake.uri).read().to_pylist(), key=lambda r: r["id"])
    assert got == rows
    completed = Table.open(lake.uri).timeline().completed
    assert killed not in {i.requested_time for i in completed}
