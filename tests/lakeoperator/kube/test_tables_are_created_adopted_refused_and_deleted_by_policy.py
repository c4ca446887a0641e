"""LakeTables under the real operator on a real API server (no kubelet: nothing here runs Spark).

Created on disk (Ready); a second resource on the same location is refused (Failed, LocationInUse:
deleting either with deletionPolicy Delete would delete the other's data), and deleting it with Delete
keeps that data (DataKept); one over a table of another record key is refused (Failed, ConfigMismatch,
an Event), the table untouched, and deleting it with Delete keeps the table it never owned; an
identity change of a Ready table and a new location are refused by the server's CEL rules (the
operator's own refusal, where no server checks, is tested on the reconcile core). Deleting with
`Retain` (the default) is
immediate and keeps the data; with `Delete` the operator's finalizer holds the resource while a
LakeWriter refers to the table (Event DeletionWaiting), then deletes the data. `weir.dev/paused`
stops reconciliation (ReconciliationPaused); `weir.dev/managed: "false"` detaches a table (its finalizer
goes, deleting it keeps the data). A table on S3 is created with the options of the Secret its
spec.storage names; a missing Secret is reported, not retried in a loop."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lakecore import Table
from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.kube_client import KubeClient, KubeClientError, resource_path
from tests.support.kube_server import ControlPlane
from tests.support.operator import CRDS, OperatorProcess, events_of, release_tables, wait_until, weir_path
from tests.support.s3 import S3Server

pytestmark = pytest.mark.k8s



class Tables:
    """The test's namespace's LakeTables, through the admin's client."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self.client, self.namespace = client, namespace

    def path(self, name: str | None = None, kind: str = "LakeTable") -> str:
        return weir_path(kind, name, self.namespace)

    def status(self, name: str) -> dict[str, Any]:
        got: dict[str, Any] = self.client.get(self.path(name)).get("status") or {}
        return got

    def condition(self, name: str, kind: str) -> dict[str, Any]:
        return next((c for c in self.status(name).get("conditions") or () if c["type"] == kind), {})

    def gone(self, name: str) -> bool:
        try:
            self.client.get(self.path(name))
        except KubeClientError as exc:
            return exc.status == 404
        return False

    def reasons(self, name: str) -> list[str]:
        return [e["reason"] for e in events_of(self.client, self.namespace, name)]

    def refused(self, name: str, patch: dict[str, Any]) -> str:
        """The server's refusal of `patch` (a CEL rule's message)."""
        with pytest.raises(KubeClientError) as refusal:
            self.client.patch(self.path(name), patch)
        assert refusal.value.status == 422, refusal.value
        return str(refusal.value.body["message"])


@pytest.fixture
def tables(kube_server: ControlPlane, kube_namespace: str, tmp_path: Path) -> Iterator[Tables]:
    kube_server.apply_crds(*CRDS)
    process = OperatorProcess(kube_server, tmp_path, namespaces=(kube_namespace,)).start()
    yield Tables(kube_server.client(), kube_namespace)
    process.stop()
    release_tables(kube_server.client(), kube_namespace)
    assert "Traceback" not in process.log()


def test_create_adopt_refuse_and_delete_by_policy(tables: Tables, tmp_path: Path) -> None:
    client, path = tables.client, tables.path
    location = tmp_path / "lake" / "orders"
    client.create(path(), table(tmp_path))
    wait_until(lambda: tables.status("orders").get("phase") == "Ready")
    assert Table.open(str(location)).config.record_key == ("id",)

    same = table(tmp_path, name="orders-again", location=str(location) + "/", deletionPolicy="Delete")
    client.create(path(), same)
    wait_until(lambda: tables.status("orders-again").get("phase") == "Failed")
    assert tables.condition("orders-again", "Ready")["reason"] == "LocationInUse"
    assert f"LakeTable orders manages the table at {location}/ already" in \
        tables.status("orders-again")["lastError"]
    foreign = tmp_path / "lake" / "foreign"   # a table made outside the operator, keyed by id
    Table.create(str(foreign), schema=Table.open(str(location)).schema, record_key="id", ordering_field="ts",
                 buckets=1)
    other = table(tmp_path, name="orders-by-amount", recordKey=["amount"], location=str(foreign),
                  deletionPolicy="Delete")
    client.create(path(), other)
    wait_until(lambda: tables.status("orders-by-amount").get("phase") == "Failed")
    assert tables.condition("orders-by-amount", "Ready")["reason"] == "ConfigMismatch"
    assert "record" in tables.status("orders-by-amount")["lastError"].lower()
    wait_until(lambda: "ConfigMismatch" in tables.reasons("orders-by-amount"))
    # an identity change and a move are refused by the server (CEL), the table untouched
    assert "recordKey is immutable" in tables.refused("orders", {"spec": {"recordKey": ["amount"]}})
    moved = tmp_path / "lake" / "orders-moved"
    assert "location is immutable" in tables.refused("orders", {"spec": {"location": str(moved)}})
    assert Table.open(str(location)).config.record_key == ("id",) and not moved.exists()
    assert tables.status("orders")["phase"] == "Ready"

    # Delete on a table this resource never owned: the finalizer goes, the data stays
    for name in ("orders-again", "orders-by-amount"):
        client.delete(path(name))
        wait_until(lambda name=name: tables.gone(name))
        assert "DataKept" in tables.reasons(name)
    assert Table.open(str(location)).config.record_key == ("id",)
    assert Table.open(str(foreign)).config.record_key == ("id",)

    # Retain (the default): no finalizer, deleted at once, the data stays
    client.create(path(), table(tmp_path, name="orders-readopted", location=str(foreign)))
    wait_until(lambda: tables.status("orders-readopted").get("phase") == "Ready")   # adopted: nobody owns it
    assert not client.get(path("orders-readopted"))["metadata"].get("finalizers")
    client.delete(path("orders-readopted"))
    assert tables.gone("orders-readopted") and (foreign / ".weir").exists()

    # Delete: a finalizer; held while a writer refers to the table; then the data goes
    client.patch(path("orders"), {"spec": {"deletionPolicy": "Delete"}})
    wait_until(lambda: client.get(path("orders"))["metadata"].get("finalizers")
               == ["weir.dev/delete-data"])
    client.create(path(kind="LakeWriter"), batch_writer(tmp_path))
    client.delete(path("orders"))
    wait_until(lambda: "DeletionWaiting" in tables.reasons("orders"))
    assert "LakeWriter orders-load" in tables.status("orders")["lastError"]
    assert (location / ".weir").exists() and not tables.gone("orders")
    client.delete(path("orders-load", "LakeWriter"))
    wait_until(lambda: tables.gone("orders"))
    assert not (location / "table.json").exists() and not any(location.rglob("*.json"))
    assert not any(location.iterdir()), list(location.rglob("*"))   # no empty directory left either
    assert "Deleted" in tables.reasons("orders")


def test_paused_and_unmanaged_tables(tables: Tables, tmp_path: Path) -> None:
    client, path = tables.client, tables.path
    paused = table(tmp_path, name="later")
    paused["metadata"]["annotations"] = {"weir.dev/paused": "true"}
    client.create(path(), paused)
    wait_until(lambda: tables.condition("later", "ReconciliationPaused").get("status") == "True")
    assert not (tmp_path / "lake" / "later").exists()   # paused: nothing done
    client.patch(path("later"), {"metadata": {"annotations": {"weir.dev/paused": None}}})
    wait_until(lambda: tables.status("later").get("phase") == "Ready")
    assert tables.condition("later", "ReconciliationPaused")["status"] == "False"

    kept = table(tmp_path, name="kept", deletionPolicy="Delete")
    client.create(path(), kept)
    wait_until(lambda: tables.status("kept").get("phase") == "Ready"
               and client.get(path("kept"))["metadata"].get("finalizers"))
    client.patch(path("kept"), {"metadata": {"annotations": {"weir.dev/managed": "false"}}})
    wait_until(lambda: not client.get(path("kept"))["metadata"].get("finalizers"))
    client.delete(path("kept"))
    assert tables.gone("kept") and (tmp_path / "lake" / "kept" / ".weir").exists()


@pytest.mark.s3
def test_a_table_on_s3_uses_the_secret_its_spec_names(tables: Tables, tmp_path: Path,
                                                      s3_server: S3Server) -> None:
    client, path = tables.client, tables.path
    s3_server.client().create_bucket(Bucket="op-lake")
    body = table(tmp_path, name="remote", location="s3://op-lake/orders",
                 storage={"secretRef": {"name": "lake-credentials", "key": "options.json"}})
    client.create(path(), body)
    wait_until(lambda: tables.condition("remote", "Ready").get("reason") == "InvalidSpec")
    assert "no Secret 'lake-credentials'" in tables.status("remote")["lastError"]
    secret = base64.b64encode(json.dumps(s3_server.s3fs_options()).encode()).decode()
    client.create(resource_path("v1", "secrets", tables.namespace),
                  {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lake-credentials"},
                   "data": {"options.json": secret}})
    wait_until(lambda: tables.status("remote").get("phase") == "Ready", timeout=60)   # looked at again
    assert Table.open("s3://op-lake/orders", storage_options=s3_server.s3fs_options()).config.name == "remote"


def test_a_relative_location_is_refused_on_a_cluster(tables: Tables, tmp_path: Path) -> None:
    """A relative path meant the operator's own working directory, where no driver pod looks: the table
    was created there and showed Ready, and every writer failed with TableNotFound."""
    client, path = tables.client, tables.path
    client.create(path(), table(tmp_path, name="relative", location="lake/relative"))
    wait_until(lambda: tables.condition("relative", "Ready").get("reason") == "InvalidSpec")
    said = tables.status("relative")["lastError"]
    assert "spec.location: 'lake/relative' is a relative path, which only `weir run` resolves" in said, said
    assert not any(tmp_path.rglob("relative")), list(tmp_path.rglob("relative"))
