"""The operator's watches survive what a real API server does to them, without missing or repeating work.

Each test has a control plane of its own (it is restarted or compacted). No kubelet: driver pods are
created, not run, so every writer stays Submitted and "work" is countable: each writer has exactly
one driver pod, named after its only submission (two after a restartNonce change, the first deleted).

- The API server restarted mid-run over the same etcd: writers created just before it stops and
  right after it is back are all submitted once; a restartNonce changed after the restart replaces
  its writer's driver once.
- A watch expired: the operator is cut off from the server (a partition at a proxy in front of it)
  while writers are created and changed, and etcd is compacted meanwhile; the server serves watches
  from etcd (no watch cache), so the operator's watches resume with 410 Gone, list again, and pick up
  everything that happened while it saw nothing.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.builders.driver_pod import child_name
from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.fixtures import require_controlplane
from tests.support.kube_client import KubeClient, resource_path
from tests.support.kube_faults import FaultProxy
from tests.support.kube_server import ControlPlane
from tests.support.operator import CRDS, OperatorProcess, wait_until, weir_path

pytestmark = [pytest.mark.k8s, pytest.mark.crash]


class Lake:
    """A namespace's writers and pods, through the admin's client."""

    def __init__(self, server: ControlPlane, work: Path) -> None:
        server.apply_crds(*CRDS)
        self.client: KubeClient = server.client()
        self.namespace = server.create_namespace("lake")
        self.work = work

    def create_table(self) -> None:
        self.client.create(weir_path("LakeTable", namespace=self.namespace), table(self.work))
        self.client.wait_for(weir_path("LakeTable", "orders", self.namespace),
                             lambda o: (o.get("status") or {}).get("phase") == "Ready", timeout=60)

    def create_writers(self, names: range) -> None:
        for i in names:
            self.client.create(weir_path("LakeWriter", namespace=self.namespace),
                               batch_writer(self.work, name=f"w{i}"))

    def restart(self, name: str, nonce: str) -> None:
        self.client.patch(weir_path("LakeWriter", name, self.namespace), {"spec": {"restartNonce": nonce}})

    def writers(self) -> dict[str, dict[str, Any]]:
        items = self.client.get(weir_path("LakeWriter", namespace=self.namespace))["items"]
        return {w["metadata"]["name"]: w.get("status") or {} for w in items}

    def pods(self) -> dict[str, list[str]]:
        """Writer -> the names of its driver pods (not being deleted)."""
        out: dict[str, list[str]] = {}
        for pod in self.client.get(resource_path("v1", "pods", self.namespace))["items"]:
            meta = pod["metadata"]
            if not meta.get("deletionTimestamp"):
                out.setdefault(meta["labels"]["weir.dev/writer"], []).append(meta["name"])
        return out

    def settled(self, submissions: dict[str, int]) -> bool:
        """Every writer has its `submissions`-th submission's pod, and only that one."""
        writers, pods = self.writers(), self.pods()
        return writers.keys() == submissions.keys() and all(
            status.get("attempts", {}).get("total") == submissions[name]
            and pods.get(name) == [child_name(status.get("submissionId") or "-")]
            for name, status in writers.items())

    def check_settled(self, submissions: dict[str, int], operator: OperatorProcess) -> None:
        wait_until(lambda: self.settled(submissions), timeout=90,
                   show=lambda: f"{self.writers()}\n{self.pods()}\n{operator.log()[-3000:]}")
        time.sleep(2)   # a repeated submission, were one coming, has had its chance
        assert self.settled(submissions), (self.writers(), self.pods())


def test_an_api_server_restart_mid_run_loses_and_repeats_nothing(tmp_path: Path) -> None:
    require_controlplane()
    with ControlPlane(tmp_path / "controlplane") as server:
        lake = Lake(server, tmp_path)
        operator = OperatorProcess(server, tmp_path, namespaces=(lake.namespace,)).start()
        try:
            lake.create_table()
            lake.create_writers(range(5))
            server.restart_apiserver(down_seconds=2)   # whatever the operator had not seen yet
            lake.create_writers(range(5, 10))
            lake.check_settled({f"w{i}": 1 for i in range(10)}, operator)
            lake.restart("w0", "after-the-restart")
            lake.check_settled({"w0": 2} | {f"w{i}": 1 for i in range(1, 10)}, operator)
        finally:
            operator.stop()
    assert "Traceback" not in operator.log()


def test_an_expired_watch_is_listed_again_and_nothing_is_missed_or_repeated(tmp_path: Path) -> None:
    require_controlplane()
    with ControlPlane(tmp_path / "controlplane", extra_apiserver_args=["--watch-cache=false"]) as server, \
            FaultProxy(server) as proxy:
        lake = Lake(server, tmp_path)
        operator = OperatorProcess(server, tmp_path, namespaces=(lake.namespace,),
                                   kubeconfig=proxy.write_kubeconfig(tmp_path / "via-proxy", lake.namespace))
        operator.start()
        try:
            lake.create_table()
            lake.create_writers(range(2))
            lake.check_settled({"w0": 1, "w1": 1}, operator)

            proxy.cut()
            lake.create_writers(range(2, 6))
            lake.restart("w0", "while-cut-off")
            server.compact_etcd()   # the versions the operator last saw are gone
            time.sleep(1)
            proxy.heal()
            lake.check_settled({"w0": 2} | {f"w{i}": 1 for i in range(1, 6)}, operator)
        finally:
            operator.stop()
    log = operator.log()
    assert f"Restarting the watch-stream for lakewriters.v1alpha1.weir.dev in '{lake.namespace}'" in log
    assert "Traceback" not in log
