"""LakeTable details the create/adopt/delete test leaves out, against the real operator (no Spark):
the table's status follows writes made outside the operator (latestInstant); a paused LakeWriter and a
paused TableService that refer to a table with deletionPolicy Delete start no pod, and both hold its
deletion (phase Deleting, Ready False DeletionWaiting, status.lastError names them) until they are
deleted, then the data goes; changing the policy from Delete to Retain removes the finalizer."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest

from lakecore import Table
from tests.lakeoperator.kube.manifests import WEIR, batch_writer, table
from tests.support.operator import Cluster

pytestmark = pytest.mark.k8s
FINALIZER = "weir.dev/delete-data"
PAUSED = {"weir.dev/paused": "true"}


def condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or () if c["type"] == type_), {})


def wait_event(cluster: Cluster, name: str, reason: str, timeout: float = 30) -> None:
    """The operator posts an Event just after the status it goes with: poll until it is there."""
    deadline = time.monotonic() + timeout
    while reason not in (seen := [e["reason"] for e in cluster.events(name)]):
        assert time.monotonic() < deadline, f"no {reason} Event for {name} in {timeout}s; Events: {seen}"
        time.sleep(0.2)


def wait_finalizers(cluster: Cluster, name: str, want: list[str]) -> None:
    cluster.client.wait_for(cluster.path("LakeTable", name),
                            lambda o: list(o["metadata"].get("finalizers") or []) == want, timeout=30)


def test_a_delete_policy_table_waits_for_its_writers_and_services(cluster: Cluster) -> None:
    work = cluster.work
    location = work / "lake" / "gone"
    cluster.apply(table(work, name="gone", deletionPolicy="Delete"))
    cluster.wait_status("LakeTable", "gone", lambda s: s.get("phase") == "Ready", timeout=30)
    wait_finalizers(cluster, "gone", [FINALIZER])

    # a write from outside the operator shows in the status once the table is looked at again
    written = Table.open(str(location)).upsert(pa.Table.from_pylist(
        [{"id": 1, "amount": 1, "ts": 1}],
        schema=pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.int64()),
                          ("ts", pa.int64())])))
    cluster.patch("LakeTable", "gone", {"metadata": {"labels": {"written": "1"}}})
    cluster.wait_status("LakeTable", "gone",
                        lambda s: s.get("latestInstant") == written.instant.requested_time, timeout=30)

    writer = batch_writer(work, name="gone-load", table_name="gone")
    writer["metadata"]["annotations"] = dict(PAUSED)
    cluster.apply(writer)
    cluster.apply({"apiVersion": WEIR, "kind": "TableService",
                   "metadata": {"name": "gone-clean", "annotations": dict(PAUSED)},
                   "spec": {"tableRef": {"name": "gone"}, "type": "clean",
                            "trigger": {"afterDeltaCommits": 1},
                            "spark": {"mode": "local", "localCores": 1}}})
    for kind, name in (("LakeWriter", "gone-load"), ("TableService", "gone-clean")):
        cluster.wait_status(kind, name, lambda s: condition(s, "ReconciliationPaused")
                            .get("status") == "True", timeout=30)
    assert not cluster.pods()            # paused: neither starts a pod

    cluster.delete("LakeTable", "gone")
    waiting = cluster.wait_status("LakeTable", "gone", lambda s: bool(s.get("lastError")), timeout=30)
    assert "LakeWriter gone-load" in waiting["status"]["lastError"]
    assert "TableService gone-clean" in waiting["status"]["lastError"]
    wait_event(cluster, "gone", "DeletionWaiting")
    # no longer shown Ready: it is on its way out, and no new run starts on it
    assert waiting["status"]["phase"] == "Deleting", waiting["status"]
    ready = condition(waiting["status"], "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "DeletionWaiting"), waiting["status"]
    assert "LakeWriter gone-load" in ready["message"], ready
    cluster.delete("LakeWriter", "gone-load")
    assert Table.open(str(location)).read().num_rows == 1    # the service still holds it
    cluster.delete("TableService", "gone-clean")
    cluster.client.wait_deleted(cluster.path("LakeTable", "gone"), timeout=60)
    assert not [p for p in location.rglob("*") if p.is_file()]
    wait_event(cluster, "gone", "Deleted")

    # Delete -> Retain: the finalizer goes, and deleting the resource leaves the data
    cluster.apply(table(work, name="relaxed", deletionPolicy="Delete"))
    wait_finalizers(cluster, "relaxed", [FINALIZER])
    cluster.patch("LakeTable", "relaxed", {"spec": {"deletionPolicy": "Retain"}})
    wait_finalizers(cluster, "relaxed", [])
    cluster.delete("LakeTable", "relaxed")
    cluster.client.wait_deleted(cluster.path("LakeTable", "relaxed"), timeout=30)
    assert Table.open(str(work / "lake" / "relaxed")).read().num_rows == 0
