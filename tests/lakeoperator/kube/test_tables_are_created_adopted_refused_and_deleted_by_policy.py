"""LakeTables under the real operator (emulator, no kubelet: nothing here runs Spark).

Created on disk (Ready); a second resource on the same location with the same identity adopts it; one
with another record key is refused (Failed, ConfigMismatch, an Event) and the table is untouched; an
identity change of a Ready table is refused the same way, and so is a new location (LocationChanged:
nothing is created there, the table's writers wait). Deleting with `Retain` (the default) is
immediate and keeps the data; with `Delete` the operator's finalizer holds the resource while a
LakeWriter refers to the table (Event DeletionWaiting), then deletes the data. `weir.dev/paused`
stops reconciliation (ReconciliationPaused); `weir.dev/managed: "false"` detaches a table (its finalizer
goes, deleting it keeps the data). A table on S3 is created with the options of the Secret its
spec.storage names; a missing Secret is reported, not retried in a loop."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from lakecore import Table
from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.kube_api import KubeApi, KubeClient, KubeClientError, resource_path
from tests.support.operator import ROOT, OperatorProcess, wait_until, weir_path
from tests.support.s3 import S3Server

pytestmark = pytest.mark.k8s



def status(client: KubeClient, name: str) -> dict[str, Any]:
    got: dict[str, Any] = client.get(weir_path("LakeTable", name)).get("status") or {}
    return got


def condition(client: KubeClient, name: str, kind: str) -> dict[str, Any]:
    return next((c for c in status(client, name).get("conditions") or () if c["type"] == kind), {})


def gone(client: KubeClient, name: str) -> bool:
    try:
        client.get(weir_path("LakeTable", name))
    except KubeClientError as exc:
        return exc.status == 404
    return False


def reasons(client: KubeClient, name: str) -> list[str]:
    return [e["reason"] for e in client.get(resource_path("v1", "events", "default"))["items"]
            if e["involvedObject"]["name"] == name]


@pytest.fixture
def operator(kube_api: KubeApi, tmp_path: Path):  # type: ignore[no-untyped-def]
    kube_api.apply_crds(*sorted((ROOT / "crds").glob("weir.dev_*.yaml")))
    process = OperatorProcess(kube_api, tmp_path).start()
    yield process
    process.stop()
    assert "Traceback" not in process.log()


def test_create_adopt_refuse_and_delete_by_policy(kube_api: KubeApi, tmp_path: Path, operator: Any) -> None:
    client = kube_api.client()
    location = tmp_path / "lake" / "orders"
    client.create(weir_path("LakeTable"), table(tmp_path))
    wait_until(lambda: status(client, "orders").get("phase") == "Ready")
    assert Table.open(str(location)).config.record_key == ("id",)

    same = table(tmp_path, name="orders-again")
    same["spec"]["location"] = str(location)
    client.create(weir_path("LakeTable"), same)
    wait_until(lambda: status(client, "orders-again").get("phase") == "Ready")
    other = table(tmp_path, name="orders-by-amount", recordKey=["amount"])
    other["spec"]["location"] = str(location)
    client.create(weir_path("LakeTable"), other)
    wait_until(lambda: status(client, "orders-by-amount").get("phase") == "Failed")
    assert condition(client, "orders-by-amount", "Ready")["reason"] == "ConfigMismatch"
    assert "record" in status(client, "orders-by-amount")["lastError"].lower()
    wait_until(lambda: "ConfigMismatch" in reasons(client, "orders-by-amount"))
    client.patch(weir_path("LakeTable", "orders"), {"spec": {"recordKey": ["amount"]}})   # no CEL here
    wait_until(lambda: condition(client, "orders", "Ready").get("reason") == "ConfigMismatch")
    assert Table.open(str(location)).config.record_key == ("id",)   # untouched
    client.patch(weir_path("LakeTable", "orders"), {"spec": {"recordKey": ["id"]}})
    wait_until(lambda: status(client, "orders").get("phase") == "Ready")
    assert status(client, "orders")["location"] == str(location)

    # a table does not move: a new location is refused (CEL refuses it on a real API server; the
    # emulator has no CEL), nothing is created there, and a writer of the table waits
    moved = tmp_path / "lake" / "orders-moved"
    client.patch(weir_path("LakeTable", "orders"), {"spec": {"location": str(moved)}})
    wait_until(lambda: condition(client, "orders", "Ready").get("reason") == "LocationChanged")
    assert status(client, "orders")["phase"] == "Failed"
    assert str(location) in status(client, "orders")["lastError"]
    wait_until(lambda: "LocationChanged" in reasons(client, "orders"))
    client.create(weir_path("LakeWriter"), batch_writer(tmp_path, name="orders-early"))
    wait_until(lambda: "spec.location changed" in " ".join(
        c.get("message") or "" for c in (client.get(weir_path("LakeWriter", "orders-early")).get("status")
                                         or {}).get("conditions") or ()))
    assert not moved.exists() and status(client, "orders")["location"] == str(location)
    client.delete(weir_path("LakeWriter", "orders-early"))
    client.patch(weir_path("LakeTable", "orders"), {"spec": {"location": str(location)}})
    wait_until(lambda: status(client, "orders").get("phase") == "Ready")

    # Retain (the default): no finalizer, deleted at once, the data stays
    assert not client.get(weir_path("LakeTable", "orders-again"))["metadata"].get("finalizers")
    client.delete(weir_path("LakeTable", "orders-again"))
    assert gone(client, "orders-again") and (location / ".weir").exists()
    client.delete(weir_path("LakeTable", "orders-by-amount"))

    # Delete: a finalizer; held while a writer refers to the table; then the data goes
    client.patch(weir_path("LakeTable", "orders"), {"spec": {"deletionPolicy": "Delete"}})
    wait_until(lambda: client.get(weir_path("LakeTable", "orders"))["metadata"].get("finalizers")
               == ["weir.dev/delete-data"])
    client.create(weir_path("LakeWriter"), batch_writer(tmp_path))
    client.delete(weir_path("LakeTable", "orders"))
    wait_until(lambda: "DeletionWaiting" in reasons(client, "orders"))
    assert "LakeWriter orders-load" in status(client, "orders")["lastError"]
    assert (location / ".weir").exists() and not gone(client, "orders")
    client.delete(weir_path("LakeWriter", "orders-load"))
    wait_until(lambda: gone(client, "orders"))
    assert not (location / "table.json").exists() and not any(location.rglob("*.json"))
    assert "Deleted" in reasons(client, "orders")


def test_paused_and_unmanaged_tables(kube_api: KubeApi, tmp_path: Path, operator: Any) -> None:
    client = kube_api.client()
    paused = table(tmp_path, name="later")
    paused["metadata"]["annotations"] = {"weir.dev/paused": "true"}
    client.create(weir_path("LakeTable"), paused)
    wait_until(lambda: condition(client, "later", "ReconciliationPaused").get("status") == "True")
    assert not (tmp_path / "lake" / "later").exists()   # paused: nothing done
    client.patch(weir_path("LakeTable", "later"), {"metadata": {"annotations": {"weir.dev/paused": None}}})
    wait_until(lambda: status(client, "later").get("phase") == "Ready")
    assert condition(client, "later", "ReconciliationPaused")["status"] == "False"

    kept = table(tmp_path, name="kept", deletionPolicy="Delete")
    client.create(weir_path("LakeTable"), kept)
    wait_until(lambda: status(client, "kept").get("phase") == "Ready"
               and client.get(weir_path("LakeTable", "kept"))["metadata"].get("finalizers"))
    client.patch(weir_path("LakeTable", "kept"), {"metadata": {"annotations": {"weir.dev/managed": "false"}}})
    wait_until(lambda: not client.get(weir_path("LakeTable", "kept"))["metadata"].get("finalizers"))
    client.delete(weir_path("LakeTable", "kept"))
    assert gone(client, "kept") and (tmp_path / "lake" / "kept" / ".weir").exists()


@pytest.mark.s3
def test_a_table_on_s3_uses_the_secret_its_spec_names(kube_api: KubeApi, tmp_path: Path, operator: Any,
                                                      s3_server: S3Server) -> None:
    client = kube_api.client()
    s3_server.client().create_bucket(Bucket="op-lake")
    body = table(tmp_path, name="remote", location="s3://op-lake/orders",
                 storage={"secretRef": {"name": "lake-credentials", "key": "options.json"}})
    client.create(weir_path("LakeTable"), body)
    wait_until(lambda: condition(client, "remote", "Ready").get("reason") == "InvalidSpec")
    assert "no Secret 'lake-credentials'" in status(client, "remote")["lastError"]
    secret = base64.b64encode(json.dumps(s3_server.s3fs_options()).encode()).decode()
    client.create(resource_path("v1", "secrets", "default"),
                  {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lake-credentials"},
                   "data": {"options.json": secret}})
    wait_until(lambda: status(client, "remote").get("phase") == "Ready", timeout=60)   # looked at again
    assert Table.open("s3://op-lake/orders", storage_options=s3_server.s3fs_options()).config.name == "remote"
