"""A pass that acted on a pod posts its Event even when the status write after it fails.

Forced interleaving, on the real API server behind the fault proxy (tests/support/kube_faults.py): a
writer's driver pod exists, the writer is suspended, and every write of the writer's status is refused
(409: the object changed under the pass; 503: the API server briefly unable). The operator's pass
deletes the driver, then its status write fails. Before, the pass's Events were posted only after a
successful status write, so the "Suspending" Event was lost: the next pass found no driver and planned
no Event of its own (what CI saw once, the API server slow under load). Now the Event is posted once,
and the status follows when the writes are let through. Checked: the 503 case fails on the old code;
the 409 one passed there too (it guards the Event being posted once across the immediate re-runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.kube_client import resource_path
from tests.support.kube_faults import FaultProxy
from tests.support.kube_server import ControlPlane
from tests.support.operator import CRDS, OperatorProcess, events_of, wait_until, weir_path

pytestmark = [pytest.mark.k8s]
NAME = "orders-load"


@pytest.mark.parametrize("fault", [(409, "Conflict", "the object has been modified"),
                                   (503, "ServiceUnavailable", "the server is briefly unable")],
                         ids=["conflict", "unavailable"])
def test_a_pass_posts_its_events_when_its_status_write_fails(
        kube_server: ControlPlane, kube_namespace: str, tmp_path: Path, fault: tuple[int, str, str]) -> None:
    kube_server.apply_crds(*CRDS)
    client, ns = kube_server.client(), kube_namespace

    def writer_status() -> dict[str, object]:
        return client.get(weir_path("LakeWriter", NAME, ns)).get("status") or {}

    def driver_pods() -> list[str]:
        return [p["metadata"]["name"] for p in client.get(resource_path("v1", "pods", ns))["items"]]

    with FaultProxy(kube_server) as proxy:
        operator = OperatorProcess(kube_server, tmp_path, namespaces=(ns,),
                                   kubeconfig=proxy.write_kubeconfig(tmp_path / "via-proxy", ns)).start()
        try:
            client.create(weir_path("LakeTable", namespace=ns), table(tmp_path))
            client.create(weir_path("LakeWriter", namespace=ns), batch_writer(tmp_path, name=NAME))
            wait_until(lambda: writer_status().get("driverPod") and driver_pods())   # no kubelet: Pending

            proxy.faults[("PUT", "lakewriters/status")] = fault
            client.patch(weir_path("LakeWriter", NAME, ns), {"spec": {"state": "Suspended"}})
            wait_until(lambda: not driver_pods())            # the pass deleted the driver...
            wait_until(lambda: proxy.refused >= 2)            # ...and its status writes were refused
            assert writer_status().get("phase") != "Suspended"

            proxy.faults.clear()
            wait_until(lambda: writer_status().get("phase") == "Suspended")
            def reasons() -> list[str]:
                return [e["reason"] for e in events_of(client, ns, NAME)]

            wait_until(lambda: "Suspending" in reasons(), timeout=15, show=reasons)
            assert reasons().count("Suspending") == 1, reasons()
        finally:
            operator.stop()
    assert "Traceback" not in operator.log()
