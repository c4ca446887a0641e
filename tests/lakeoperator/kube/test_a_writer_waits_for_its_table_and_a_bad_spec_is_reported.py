"""Against the real operator (no kubelet: pods are created, not run): a LakeWriter applied before its
LakeTable is reported (Ready=False, InvalidSpec, an Event naming the missing table) and starts nothing;
once the table is created the writer is reconciled again without being touched, and its driver pod is
created, once. A spec the operator cannot run (a spark.conf key it manages) is reported the same way,
and fixing it submits the writer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.kube_api import KubeApi, resource_path
from tests.support.operator import ROOT, OperatorProcess, wait_until, weir_path

pytestmark = pytest.mark.k8s



def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == kind), {})


def test_a_writer_waits_for_its_table_and_a_bad_spec_is_reported(kube_api: KubeApi, tmp_path: Path) -> None:
    kube_api.apply_crds(*sorted((ROOT / "crds").glob("weir.dev_*.yaml")))
    client = kube_api.client()
    operator = OperatorProcess(kube_api, tmp_path).start()
    try:
        client.create(weir_path("LakeWriter"), batch_writer(tmp_path))
        waiting = client.wait_for(weir_path("LakeWriter", "orders-load"),
                                  lambda o: condition(o, "Ready").get("reason") == "InvalidSpec", timeout=30)
        assert "no LakeTable 'orders'" in waiting["status"]["lastError"]
        events = wait_until(lambda: [e for e in client.get(resource_path("v1", "events", "default"))["items"]
                                     if e["involvedObject"]["name"] == "orders-load"])
        assert [(e["type"], e["reason"]) for e in events] == [("Warning", "InvalidSpec")]
        assert client.get(resource_path("v1", "pods", "default"))["items"] == []

        client.create(weir_path("LakeTable"), table(tmp_path))
        submitted = client.wait_for(weir_path("LakeWriter", "orders-load"),
                                    lambda o: (o.get("status") or {}).get("phase") == "Submitted", timeout=30)
        pod_name = submitted["status"]["driverPod"]
        wait_until(lambda: [p for p in client.get(resource_path("v1", "pods", "default"))["items"]
                            if p["metadata"]["name"] == pod_name])

        bad = batch_writer(tmp_path, name="bad-conf")
        bad["spec"]["spark"]["conf"] = {"spark.master": "local[8]"}
        client.create(weir_path("LakeWriter"), bad)
        reported = client.wait_for(weir_path("LakeWriter", "bad-conf"),
                                   lambda o: condition(o, "Ready").get("reason") == "InvalidSpec", timeout=30)
        assert "spark.master" in reported["status"]["lastError"]
        client.patch(weir_path("LakeWriter", "bad-conf"), {"spec": {"spark": {"conf": None}}})
        client.wait_for(weir_path("LakeWriter", "bad-conf"),
                        lambda o: (o.get("status") or {}).get("phase") == "Submitted", timeout=30)
        wait_until(lambda: len(client.get(resource_path("v1", "pods", "default"))["items"]) == 2)
    finally:
        operator.stop()
    pods = client.get(resource_path("v1", "pods", "default"))["items"]
    events = [e for e in client.get(resource_path("v1", "events", "default"))["items"]
              if e["involvedObject"]["name"] == "orders-load"]
    assert [e["reason"] for e in events].count("InvalidSpec") == 1   # not once per pass
    assert sorted(p["metadata"]["labels"]["weir.dev/writer"] for p in pods) == ["bad-conf", "orders-load"]
    assert "Traceback" not in operator.log()
