"""Two operator replicas against a real API server with leader election (a coordination.k8s.io Lease, 3 s,
renewed every second): only the holder reconciles and supervises — the standby submits and scans
nothing; the leader SIGKILLed, the standby takes the lease after it went unrenewed, reconciles what came
meanwhile and supervises the table; every writer has exactly one driver pod."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.kube_client import KubeClient, resource_path
from tests.support.kube_server import ControlPlane
from tests.support.operator import CRDS, OperatorProcess, wait_until, weir_path

pytestmark = [pytest.mark.k8s, pytest.mark.crash]


def lease_path(namespace: str) -> str:
    return resource_path("coordination.k8s.io/v1", "leases", namespace, "weir-operator")


def holder(client: KubeClient, namespace: str) -> str | None:
    try:
        return str(client.get(lease_path(namespace))["spec"]["holderIdentity"])
    except Exception:
        return None


def replica(server: ControlPlane, namespace: str, work: Path, name: str) -> OperatorProcess:
    work.mkdir()
    return OperatorProcess(server, work, namespaces=(namespace,),
                           extra=("--identity", name, "--lease-namespace", namespace,
                                  "--lease-duration", "3", "--lease-renew", "1"))


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def scans(replica: OperatorProcess) -> float:
    line = next(line for line in replica.metrics().splitlines()
                if line.startswith("weir_supervision_scans_total "))
    return float(line.split()[1])


def pods_by_writer(client: KubeClient, namespace: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pod in client.get(resource_path("v1", "pods", namespace))["items"]:
        out.setdefault(pod["metadata"]["labels"]["weir.dev/writer"], []).append(pod["metadata"]["name"])
    return out


def test_one_replica_reconciles_and_a_standby_takes_over(kube_server: ControlPlane, kube_namespace: str,
                                                         tmp_path: Path) -> None:
    kube_server.apply_crds(*CRDS)
    client, ns = kube_server.client(), kube_namespace
    lease = lease_path(ns)
    a = replica(kube_server, ns, tmp_path / "a", "replica-a")
    b = replica(kube_server, ns, tmp_path / "b", "replica-b")
    a.start()
    wait_until(lambda: holder(client, ns) == "replica-a")
    b.start()
    try:
        assert "weir_leader 1.0" in a.metrics() and "weir_leader 0.0" in b.metrics()
        client.create(weir_path("LakeTable", namespace=ns), table(tmp_path))
        for i in range(5):
            client.create(weir_path("LakeWriter", namespace=ns), batch_writer(tmp_path, name=f"w{i}"))
        wait_until(lambda: len(pods_by_writer(client, ns)) == 5)
        assert "Submitting" in a.log() and "Submitting" not in b.log()   # the standby did nothing
        wait_until(lambda: scans(a) > 0)                                  # the leader supervises the table
        assert scans(b) == 0                                              # the standby does not

        a.kill()
        last_renewal = stamp(client.get(lease)["spec"]["renewTime"])   # the dead leader renews no more
        for i in range(5, 10):
            client.create(weir_path("LakeWriter", namespace=ns), batch_writer(tmp_path, name=f"w{i}"))
        wait_until(lambda: holder(client, ns) == "replica-b", timeout=30)
        took_over = (stamp(client.get(lease)["spec"]["acquireTime"]) - last_renewal).total_seconds()
        wait_until(lambda: len(pods_by_writer(client, ns)) == 10)
        assert "weir_leader 1.0" in b.metrics()
        wait_until(lambda: scans(b) > 0)                                  # and now supervises it
        assert client.get(lease)["spec"]["leaseTransitions"] == 1
        assert took_over >= 3.0, "the standby must wait a whole lease duration after the last renewal"
    finally:
        b.stop()
        a.stop()
    assert all(len(names) == 1 for names in pods_by_writer(client, ns).values()), pods_by_writer(client, ns)
    assert "Traceback" not in a.log() + b.log()
