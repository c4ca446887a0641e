"""The real operator (`python -m lakeoperator`) against a real API server, with the process kubelet:
a LakeTable applied is created on disk, a batch LakeWriter applied becomes one driver pod that runs the
sparkjobs entry point (local Spark) and fills the table, and status, Events and metrics say so. The
writer deleted while no operator runs, its driver pod goes all the same: the controller-manager's garbage
collector follows the pod's ownerReference."""

from __future__ import annotations

import json

import pytest

from lakecore import Table
from tests.lakeoperator.kube.manifests import batch_writer, table, write_input
from tests.support.operator import Cluster, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.spark]


def test_a_batch_writer_fills_its_table_once(cluster: Cluster) -> None:
    rows = write_input(cluster.work)
    created = {"LakeTable": cluster.apply(table(cluster.work))}   # as the server stored it (defaults)
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)
    created["LakeWriter"] = cluster.apply(batch_writer(cluster.work))
    done = cluster.wait_status("LakeWriter", "orders-load", lambda s: s.get("phase") == "Succeeded",
                               timeout=240)
    status = done["status"]
    assert status["attempts"]["total"] == 1
    assert status["history"][0]["cause"] == "success"
    assert json.loads(status["appliedSpec"]) == done["spec"]
    pods = cluster.pods(selector="weir.dev/writer=orders-load")
    assert [p["metadata"]["name"] for p in pods] == [status["history"][0]["submissionId"]]
    assert pods[0]["metadata"]["ownerReferences"][0]["uid"] == done["metadata"]["uid"]
    got = sorted(Table.open(str(cluster.work / "lake" / "orders")).read().to_pylist(), key=lambda r: r["id"])
    assert got == rows
    reasons = [e["reason"] for e in cluster.events("orders-load")]
    assert "Submitted" in reasons
    # the gauge is set after the status write the test waited for
    metrics = wait_until(lambda: (m := cluster.operator.metrics())
                         and 'weir_resources{kind="LakeWriter",phase="Succeeded"} 1.0' in m and m)
    assert (f'weir_submissions_total{{kind="LakeWriter",namespace="{cluster.namespace}",table="orders"}} 1.0'
            in metrics)
    # no drift for GitOps: the operator wrote status only — spec, labels and annotations are as applied
    for kind, applied in created.items():
        live = cluster.get(kind, applied["metadata"]["name"])
        assert live["spec"] == applied["spec"] and live["metadata"]["generation"] == 1, kind
        meta = live["metadata"]
        assert not meta.get("labels") and not meta.get("annotations"), (kind, meta)

    cluster.operator.stop()
    cluster.delete("LakeWriter", "orders-load")
    wait_until(lambda: not cluster.pods(selector="weir.dev/writer=orders-load"), timeout=30,
               show=lambda: cluster.pods(selector="weir.dev/writer=orders-load"))
