"""A writer's driver that ends mid-write leaves its instant pending with a heartbeat that no longer beats.
The operator used to leave it "alive" until the heartbeat timeout (here 120 s) before its supervisor
rolled it back. Now the operator, seeing the driver pod end (Failed after kill -9) or be deleted (the
writer suspended: the kubelet removes the pod once its process is gone), records the write's proof of
death at once: `weir table describe` calls it aborted, and the next write rolls it back without waiting.

Through the real operator, API server and process kubelet; two held writers, one per table, so the two
ways a driver ends run side by side."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table
from tests.lakeoperator.kube.manifests import held_writer, reached, table, write_input
from tests.support.operator import Cluster, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.spark]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.int64()), ("ts", pa.int64())])
SLOW_HEARTBEAT = {"intervalSeconds": 5, "tolerableMisses": 24}   # a 120-s timeout
NO_RESTART = {"type": "Never"}


def over(lake: Path, instant: str) -> bool:
    """The write is aborted (its proof of death recorded, no longer alive) or rolled back already."""
    pending = {p["instant"]: p for p in Table.open(str(lake)).activity()["pending"]}
    return instant not in pending or (pending[instant]["aborted"], pending[instant]["alive"]) == (True, False)


def test_the_write_of_a_driver_that_ended_or_was_deleted_is_aborted_at_once(cluster: Cluster) -> None:
    write_input(cluster.work)
    write_input(cluster.work, source="items")
    for name in ("orders", "items"):
        cluster.apply(table(cluster.work, name, heartbeat=SLOW_HEARTBEAT))
    for name in ("orders", "items"):
        cluster.wait_status("LakeTable", name, lambda s: s.get("phase") == "Ready", timeout=30)
    killed_body, killed_pause = held_writer(cluster, "orders-load", "orders", restartPolicy=NO_RESTART)
    suspended_body, suspended_pause = held_writer(cluster, "items-load", "items", table_name="items",
                                                  restartPolicy=NO_RESTART)
    cluster.apply(killed_body)
    cluster.apply(suspended_body)
    log = lambda: cluster.operator.log()[-3000:]   # noqa: E731
    wait_until(lambda: reached(killed_pause) and reached(suspended_pause), timeout=180, show=log)
    (killed,) = reached(killed_pause)
    (suspended,) = reached(suspended_pause)
    orders, items = cluster.work / "lake" / "orders", cluster.work / "lake" / "items"
    assert not over(orders, killed) and not over(items, suspended)   # both alive, beating

    cluster.kill_driver(cluster.get("LakeWriter", "orders-load")["status"]["submissionId"])
    cluster.patch("LakeWriter", "items-load", {"spec": {"state": "Suspended"}})

    # well within the heartbeat timeout: the operator aborted both writes when their drivers ended
    wait_until(lambda: over(orders, killed) and over(items, suspended), timeout=45, show=log)
    cluster.wait_status("LakeWriter", "orders-load", lambda s: s.get("phase") == "Failed", timeout=30)
    cluster.wait_status("LakeWriter", "items-load", lambda s: s.get("phase") == "Suspended", timeout=30)
    # the next write rolls each back at once; neither reached the timeline as a commit
    for lake, instant in ((orders, killed), (items, suspended)):
        Table.open(str(lake)).upsert(pa.table({"id": [99], "amount": [1], "ts": [1]}, schema=SCHEMA))
        timeline = Table.open(str(lake)).timeline()
        assert instant not in {i.requested_time for i in timeline.pending}
        assert instant not in {i.requested_time for i in timeline.completed}
