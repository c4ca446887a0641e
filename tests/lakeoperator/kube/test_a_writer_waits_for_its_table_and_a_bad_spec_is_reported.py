"""Against the real operator on a real API server (no kubelet: pods are created, not run): a LakeWriter
applied before its LakeTable is reported (Ready=False, InvalidSpec, an Event naming the missing table)
and starts nothing; once the table is created the writer is reconciled again without being touched, and
its driver pod is created, once. A spec the operator cannot run (a spark.conf key it manages) is
reported the same way, and fixing it submits the writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.kube_client import resource_path
from tests.support.kube_server import ControlPlane
from tests.support.operator import CRDS, OperatorProcess, events_of, wait_until, weir_path

pytestmark = pytest.mark.k8s



def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == kind), {})


def test_a_writer_waits_for_its_table_and_a_bad_spec_is_reported(
        kube_server: ControlPlane, kube_namespace: str, tmp_path: Path) -> None:
    kube_server.apply_crds(*CRDS)
    client, ns = kube_server.client(), kube_namespace
    pods_path = resource_path("v1", "pods", ns)
    operator = OperatorProcess(kube_server, tmp_path, namespaces=(ns,)).start()
    try:
        client.create(weir_path("LakeWriter", namespace=ns), batch_writer(tmp_path))
        waiting = client.wait_for(weir_path("LakeWriter", "orders-load", ns),
                                  lambda o: condition(o, "Ready").get("reason") == "InvalidSpec", timeout=30)
        assert "no LakeTable 'orders'" in waiting["status"]["lastError"]
        events = wait_until(lambda: events_of(client, ns, "orders-load"))
        assert [(e["type"], e["reason"]) for e in events] == [("Warning", "InvalidSpec")]
        assert client.get(pods_path)["items"] == []

        client.create(weir_path("LakeTable", namespace=ns), table(tmp_path))
        submitted = client.wait_for(weir_path("LakeWriter", "orders-load", ns),
                                    lambda o: (o.get("status") or {}).get("phase") == "Submitted", timeout=30)
        pod_name = submitted["status"]["driverPod"]
        wait_until(lambda: [p for p in client.get(pods_path)["items"]
                            if p["metadata"]["name"] == pod_name])

        bad = batch_writer(tmp_path, name="bad-conf")
        bad["spec"]["spark"]["conf"] = {"spark.master": "local[8]"}
        client.create(weir_path("LakeWriter", namespace=ns), bad)
        reported = client.wait_for(weir_path("LakeWriter", "bad-conf", ns),
                                   lambda o: condition(o, "Ready").get("reason") == "InvalidSpec", timeout=30)
        assert "spark.master" in reported["status"]["lastError"]
        client.patch(weir_path("LakeWriter", "bad-conf", ns), {"spec": {"spark": {"conf": None}}})
        client.wait_for(weir_path("LakeWriter", "bad-conf", ns),
                        lambda o: (o.get("status") or {}).get("phase") == "Submitted", timeout=30)
        wait_until(lambda: len(client.get(pods_path)["items"]) == 2)
    finally:
        operator.stop()
    pods = client.get(pods_path)["items"]
    events = events_of(client, ns, "orders-load")
    assert [e["reason"] for e in events].count("InvalidSpec") == 1   # not once per pass
    assert sorted(p["metadata"]["labels"]["weir.dev/writer"] for p in pods) == ["bad-conf", "orders-load"]
    assert "Traceback" not in operator.log()
