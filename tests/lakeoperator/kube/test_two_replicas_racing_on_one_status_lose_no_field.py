"""Two operator replicas with no leader election (a misconfigured Deployment, or the moment of a
handover) reconcile the same writers at once on a real API server: every status write is a PUT guarded
by the resourceVersion it was planned from, so one of two racing writes is refused (409), its replica
reads again and re-plans, and no write is lost or doubled. 20 writers created, then (once settled)
each one's restartNonce changed, then half of them suspended, each step all at once under both
replicas: after each step every writer has exactly the submissions it was asked for, one driver pod
(none when suspended) named after its last submission, and in the end a status whose every field
agrees with the spec — a third operator, started alone afterwards, finds nothing to write. The
replicas did race (their metrics count refused writes). No kubelet: pods are created, not run."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.builders.driver_pod import child_name
from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.kube_client import resource_path
from tests.support.kube_server import ControlPlane
from tests.support.operator import CRDS, OperatorProcess, wait_until, weir_path

pytestmark = pytest.mark.k8s
WRITERS = 20


def conflicts(operator: OperatorProcess) -> float:
    """Reconcile passes of LakeWriters whose status write was refused as stale."""
    pattern = r'weir_reconcile_duration_seconds_count\{kind="LakeWriter",outcome="conflict"\} (\S+)'
    found = re.search(pattern, operator.metrics())
    return float(found.group(1)) if found else 0.0


def test_two_replicas_racing_on_one_status_lose_no_field(kube_server: ControlPlane, kube_namespace: str,
                                                         tmp_path: Path) -> None:
    kube_server.apply_crds(*CRDS)
    client, ns = kube_server.client(), kube_namespace

    def writers() -> dict[str, dict[str, Any]]:
        return {w["metadata"]["name"]: w for w in client.get(weir_path("LakeWriter", namespace=ns))["items"]}

    def pods() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for pod in client.get(resource_path("v1", "pods", ns))["items"]:
            out.setdefault(pod["metadata"]["labels"]["weir.dev/writer"], []).append(pod["metadata"]["name"])
        return out

    def settled(submissions: int, suspended: bool = False) -> bool:
        """Every writer has `submissions` submissions, a driver pod for the last one (none when it is
        an even-numbered writer and `suspended`), and a status of its latest spec."""
        found, running = writers(), pods()
        for name, writer in found.items():
            status, stopped = writer.get("status") or {}, suspended and int(name[1:]) % 2 == 0
            if status.get("observedGeneration") != writer["metadata"]["generation"] \
                    or (status.get("attempts") or {}).get("total") != submissions \
                    or status.get("phase") != ("Suspended" if stopped else "Submitted") \
                    or running.get(name, []) != ([] if stopped else [child_name(status["submissionId"])]):
                return False
        return len(found) == WRITERS

    def check_settled(submissions: int, suspended: bool = False) -> None:
        wait_until(lambda: settled(submissions, suspended), timeout=90, show=lambda: (
            {n: (w.get("status") or {}).get("attempts") for n, w in writers().items()}, pods()))
        time.sleep(2)   # a late write from either replica has had its chance
        assert settled(submissions, suspended)

    replicas = []
    for identity in ("a", "b"):
        (tmp_path / identity).mkdir()
        replicas.append(OperatorProcess(kube_server, tmp_path / identity, namespaces=(ns,), workers=8,
                                        extra=("--no-leader-election",)).start())
    try:
        client.create(weir_path("LakeTable", namespace=ns), table(tmp_path))
        for i in range(WRITERS):
            client.create(weir_path("LakeWriter", namespace=ns), batch_writer(tmp_path, name=f"w{i}"))
        check_settled(1)
        for i in range(WRITERS):
            client.patch(weir_path("LakeWriter", f"w{i}", ns), {"spec": {"restartNonce": "again"}})
        check_settled(2)
        for i in range(0, WRITERS, 2):
            client.patch(weir_path("LakeWriter", f"w{i}", ns), {"spec": {"state": "Suspended"}})
        check_settled(2, suspended=True)
        raced = sum(conflicts(r) for r in replicas)
    finally:
        for replica in replicas:
            replica.stop()
    assert raced > 0, "the replicas never raced on a status: the test proves nothing"

    for writer in writers().values():
        status = writer["status"]
        assert status["appliedSpec"] and status["submissionId"].startswith(f"{writer['metadata']['name']}-2-")
        assert {c["type"] for c in status["conditions"]} >= {"Ready"}, status
    before = {name: w["metadata"]["resourceVersion"] for name, w in writers().items()}
    (tmp_path / "alone").mkdir()
    alone = OperatorProcess(kube_server, tmp_path / "alone", namespaces=(ns,)).start()
    try:
        time.sleep(3)   # its first pass over every writer
    finally:
        alone.stop()
    assert {name: w["metadata"]["resourceVersion"] for name, w in writers().items()} == before
    for replica in (*replicas, alone):
        assert "Traceback" not in replica.log()
