"""`kubectl apply -f crds/` and `kubectl apply -f crds/examples/` (kubectl from the pinned wheel) against
a real API server with the real operator running: kubectl accepts the CRDs and every example, the
operator gives each resource a status, `kubectl get weir` lists them with the printer columns. The
minimal table is created (on the moto S3 server, standing in for the examples' bucket: the operator gets
its endpoint and credentials from the environment, as with an IAM role); the full one names a Secret
that does not exist here and says so; the writer of the minimal table gets its driver pod (no kubelet:
it stays Pending), the full one and the Kafka one wait for their table (TableNotReady) instead of failing
against it; the scheduled services wait for their next run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.kube_client import KubeClient, resource_path
from tests.support.kube_server import ControlPlane
from tests.support.kubectl import Kubectl
from tests.support.operator import ROOT, OperatorProcess, wait_until, weir_path
from tests.support.s3 import ACCESS_KEY, SECRET_KEY, S3Server

pytestmark = [pytest.mark.k8s, pytest.mark.s3]


def statuses(client: KubeClient, kind: str, namespace: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o.get("status") or {}
            for o in client.get(weir_path(kind, namespace=namespace))["items"]}



def test_kubectl_apply_of_the_examples_is_reconciled(kube_server: ControlPlane, kube_namespace: str,
                                                     real_kubectl: Kubectl, tmp_path: Path,
                                                     s3_server: S3Server) -> None:
    kubectl, ns = real_kubectl, kube_namespace
    s3_server.client().create_bucket(Bucket="example-bucket")
    applied = kubectl.apply(ROOT / "crds")
    assert applied.stdout.count("customresourcedefinition.apiextensions.k8s.io/") == 3, applied.stdout
    operator = OperatorProcess(kube_server, tmp_path, namespaces=(ns,), env={
        "AWS_ENDPOINT_URL": s3_server.endpoint_url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": "us-east-1"}).start()
    client = kube_server.client()
    try:
        created = kubectl.apply(ROOT / "crds" / "examples").stdout
        for name in ("laketable.weir.dev/events", "laketable.weir.dev/orders",
                     "lakewriter.weir.dev/orders-stream", "lakewriter.weir.dev/events-backfill",
                     "lakewriter.weir.dev/orders-from-kafka",
                     "tableservice.weir.dev/orders-clustering", "tableservice.weir.dev/events-compaction"):
            assert f"{name} created" in created, created
        tables = wait_until(lambda: (s := statuses(client, "LakeTable", ns))
                            and s["events"].get("phase") == "Ready" and s["orders"].get("lastError") and s,
                            show=lambda: statuses(client, "LakeTable", ns))
        assert "no Secret 'lake-s3-credentials'" in tables["orders"]["lastError"]
        writers = wait_until(lambda: (s := statuses(client, "LakeWriter", ns))
                             and s["events-backfill"].get("driverPod") and s,
                             show=lambda: statuses(client, "LakeWriter", ns))

        def pods() -> set[str]:
            listing = client.get(resource_path("v1", "pods", ns))["items"]
            return {p["metadata"]["name"] for p in listing}

        # the submission goes to status first, its pod follows on the next pass; the other writer's
        # table is not Ready:
        wait_until(lambda: pods() == {writers["events-backfill"]["driverPod"]}, show=pods)
        for name in ("orders-stream", "orders-from-kafka"):
            waiting = next(c for c in writers[name]["conditions"] if c["type"] == "Ready")
            assert waiting["reason"] == "TableNotReady" and "InvalidSpec" in waiting["message"], name
        services = wait_until(lambda: (s := statuses(client, "TableService", ns))
                              and all(v.get("nextRunAt") for v in s.values()) and s,
                              show=lambda: statuses(client, "TableService", ns))
        assert not any(v.get("activeRun") for v in services.values())

        listed = kubectl.run("get", "weir").stdout
        for name in ("events", "orders", "orders-stream", "events-backfill", "orders-clustering",
                     "events-compaction"):
            assert name in listed, listed
        writers_listed = kubectl.get_rows("lw")
        assert list(writers_listed["events-backfill"]) == [
            "NAME", "TABLE", "MODE", "PHASE", "READY", "REASON", "ATTEMPTS", "AGE"], writers_listed
        backfill = writers_listed["events-backfill"]
        assert [backfill[c] for c in ("TABLE", "MODE", "PHASE", "READY", "ATTEMPTS")] == [
            "events", "batch", "Submitted", "False", "1"], writers_listed
        for name in ("orders-stream", "orders-from-kafka"):   # their table is refused
            row = writers_listed[name]
            assert (row["PHASE"], row["READY"], row["REASON"]) == ("Pending", "False", "TableNotReady"), row
        # a writer whose spec the operator refuses never gets a phase; kubectl get still says why
        kubectl.run("apply", "-f", "-", input_text=(
            "apiVersion: weir.dev/v1alpha1\nkind: LakeWriter\nmetadata: {name: from-nowhere}\n"
            "spec: {tableRef: {name: events}, mode: batch, source: {table: {name: nowhere}}}\n"))
        wait_until(lambda: statuses(client, "LakeWriter", ns)["from-nowhere"].get("lastError"),
                   show=lambda: statuses(client, "LakeWriter", ns))
        refused = kubectl.get_rows("lw")["from-nowhere"]
        assert (refused["PHASE"], refused["READY"], refused["REASON"]) == ("", "False", "InvalidSpec"), \
            refused
        tables_listed = kubectl.get_rows("lt")
        # the server filled in the CRD's defaults (tableType), so every column has a value
        location = "s3://example-bucket/lake/events"
        events = tables_listed["events"]
        assert [events[c] for c in ("LOCATION", "TYPE", "PHASE", "READY", "REASON")] == [
            location, "merge_on_read", "Ready", "True", "TableReady"], tables_listed
        orders = tables_listed["orders"]   # names a missing Secret: refused before it got a phase
        assert (orders["PHASE"], orders["READY"], orders["REASON"]) == ("", "False", "InvalidSpec"), orders
        services_listed = kubectl.get_rows("lts")
        assert all(row["READY"] and row["REASON"] for row in services_listed.values()), services_listed
        assert "unchanged" in kubectl.apply(ROOT / "crds" / "examples").stdout   # idempotent apply
    finally:
        operator.stop()
    assert "Traceback" not in operator.log()
