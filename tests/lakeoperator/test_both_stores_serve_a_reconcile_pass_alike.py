"""The `Store` protocol (store.py) has two implementations — the Kubernetes API (kube.Kube, here against the
real API server) and `weir run`'s state directory (local.StateDir) — and one contract suite runs against
both: a missing resource reads as None and a stored one as its body, a status written reads back, an
Event lands on its resource, the spec a writer's submission runs reads back, Secrets are read where the
store holds them. Then the observe step over each store gathers one pass's inputs, typed: a writer's
LakeTable, its source table's location and its applied spec; a service's table and the options in the
table's storage Secret (on the API; none under `weir run`, whose operator uses its own environment); a
Secret that is missing or not a JSON object is the table's `secret_error`, never an exception."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.kube import Kube, connect, with_applied
from lakeoperator.local import Resource, StateDir
from lakeoperator.observe import ServiceInputs, TableInputs, WriterInputs, observe
from lakeoperator.store import Store
from tests.lakeoperator.bodies import lake_table, lake_writer, table_service
from tests.support.kube_client import resource_path
from tests.support.kube_server import ControlPlane
from tests.support.operator import ROOT, weir_path

NAMESPACE = "lake"   # weir run's; on the API server each test's own


@dataclass
class Harness:
    """A store and what a test needs to set it up and look into it the store's own way."""

    store: Store
    put: Callable[[dict[str, Any]], dict[str, Any]]                # create a resource: its body as stored
    events: Callable[[str, str], list[tuple[str, str, str]]]       # kind, name -> (type, reason, message)
    record_applied: Callable[[dict[str, Any], dict[str, Any]], None]   # a writer, the spec it runs
    put_secret: Callable[[str, str, str], None] | None             # name, key, value (None: holds none)
    namespace: str = NAMESPACE


def local_harness(tmp_path: Path, *, secrets: bool = False) -> Harness:
    """`weir run`'s store; with `secrets`, given a --secrets-dir (Secrets as <dir>/<name>/<key> files)."""
    secrets_dir = tmp_path / "secrets"
    state = StateDir(tmp_path / "state", secrets_dir=secrets_dir if secrets else None)

    def put(body: dict[str, Any]) -> dict[str, Any]:
        state.save(Resource(json.loads(json.dumps(body)), None, []))
        return state.get(body["kind"], NAMESPACE, body["metadata"]["name"]) or {}

    def events(kind: str, name: str) -> list[tuple[str, str, str]]:
        r = state.load(kind, NAMESPACE, name)
        return [(e["type"], e["reason"], e["message"]) for e in (r.events if r else None) or []]

    def record_applied(body: dict[str, Any], applied: dict[str, Any]) -> None:
        r = state.load(body["kind"], NAMESPACE, body["metadata"]["name"])
        assert r is not None
        r.applied = applied
        state.save(r)

    def put_secret(name: str, key: str, value: str) -> None:
        (secrets_dir / name).mkdir(parents=True, exist_ok=True)
        (secrets_dir / name / key).write_text(value)

    return Harness(state, put, events, record_applied, put_secret if secrets else None)


def kube_harness(tmp_path: Path, server: ControlPlane, namespace: str) -> Harness:
    server.apply_crds(*sorted((ROOT / "crds").glob("weir.dev_*.yaml")))
    kube = Kube(connect(str(server.write_kubeconfig(tmp_path / "kubeconfig"))))
    client = server.client()

    def put(body: dict[str, Any]) -> dict[str, Any]:
        # what a create may carry (the server stamps uid, resourceVersion, generation)
        stored = {k: v for k, v in body.items() if k != "status"}
        stored["metadata"] = {**{k: v for k, v in body["metadata"].items() if k in ("name", "labels",
                                                                                  "annotations")},
                              "namespace": namespace}
        created: dict[str, Any] = client.create(weir_path(body["kind"], namespace=namespace), stored)
        return created

    def events(kind: str, name: str) -> list[tuple[str, str, str]]:
        items = client.get(resource_path("v1", "events", namespace))["items"]
        return [(e["type"], e["reason"], e["message"]) for e in items
                if (e["involvedObject"]["kind"], e["involvedObject"]["name"]) == (kind, name)]

    def record_applied(body: dict[str, Any], applied: dict[str, Any]) -> None:
        current = kube.get(body["kind"], namespace, body["metadata"]["name"])
        assert current is not None
        kube.replace_status(current, with_applied(current.get("status") or {}, applied))

    def put_secret(name: str, key: str, value: str) -> None:
        client.create(resource_path("v1", "secrets", namespace),
                      {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
                       "data": {key: base64.b64encode(value.encode()).decode()}})

    return Harness(kube, put, events, record_applied, put_secret, namespace)


@pytest.fixture(params=["local", "local-secrets-dir", pytest.param("kube", marks=pytest.mark.k8s)])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param.startswith("local"):
        yield local_harness(tmp_path, secrets=request.param == "local-secrets-dir")
    else:
        yield kube_harness(tmp_path, request.getfixturevalue("kube_server"),
                           request.getfixturevalue("kube_namespace"))


def test_the_store_contract(harness: Harness) -> None:
    store, namespace = harness.store, harness.namespace
    assert store.get("LakeWriter", namespace, "nope") is None
    writer = harness.put(lake_writer())
    read = store.get("LakeWriter", namespace, "orders-ingest")
    assert read is not None and read["kind"] == "LakeWriter"
    assert read["spec"]["source"]["path"] == "s3://in/orders/"   # (the API server adds the CRD's defaults)
    assert store.applied_spec(read) is None

    written = store.replace_status(read, {"phase": "Pending", "attempts": {"total": 1}})
    assert written["status"]["phase"] == "Pending"
    assert (store.get("LakeWriter", namespace, "orders-ingest") or {})["status"]["attempts"] == {"total": 1}

    store.post_event(written, "Warning", "ConflictLost", "write 1 lost to write 0")
    assert harness.events("LakeWriter", "orders-ingest") == [
        ("Warning", "ConflictLost", "write 1 lost to write 0")]

    harness.record_applied(writer, {"tableRef": {"name": "orders"}, "mode": "batch"})
    again = store.get("LakeWriter", namespace, "orders-ingest")
    assert again is not None
    assert store.applied_spec(again) == {"tableRef": {"name": "orders"}, "mode": "batch"}

    if harness.put_secret is None:
        assert store.holds_secrets is False
    else:
        harness.put_secret("lake-credentials", "options.json", '{"key": "K"}')
        assert store.holds_secrets is True
        assert store.secret_value(namespace, "lake-credentials", "options.json") == '{"key": "K"}'
        assert store.secret_value(namespace, "lake-credentials", "other") is None
        assert store.secret_value(namespace, "absent", "options.json") is None


def test_the_observe_step_gathers_a_pass_inputs_from_either_store(harness: Harness) -> None:
    store, namespace = harness.store, harness.namespace
    secret_ref = {"secretRef": {"name": "lake-credentials", "key": "options.json"}}
    table = harness.put(lake_table(storage=secret_ref))
    harness.put({**lake_table(location="s3://lake/raw"), "metadata": {**table["metadata"], "name": "raw",
                                                                     "uid": "uid-raw"}})
    writer = harness.put(lake_writer(source={"table": {"name": "raw"}}))
    harness.record_applied(writer, {"tableRef": {"name": "orders"}, "mode": "streaming"})
    service = harness.put(table_service())

    def inputs(kind: str, name: str) -> Any:
        body = store.get(kind, namespace, name)
        assert body is not None
        return observe(store, kind, body)

    observed = inputs("LakeWriter", "orders-ingest")
    assert isinstance(observed, WriterInputs)
    assert observed.table is not None and observed.table["spec"]["location"] == "s3://lake/orders"
    assert (observed.table_name, observed.source_location) == ("orders", "s3://lake/raw")
    assert observed.applied == {"tableRef": {"name": "orders"}, "mode": "streaming"}
    assert observed.winner_running is False   # it lost no conflict: the table is not read

    if harness.put_secret is None:   # weir run: the operator opens tables with its own environment
        assert inputs("LakeTable", "orders") == TableInputs(store.get("LakeTable", namespace, "orders") or {})
        assert isinstance(inputs("TableService", service["metadata"]["name"]), ServiceInputs)
        assert inputs("TableService", service["metadata"]["name"]).storage_options is None
        return
    missing = inputs("LakeTable", "orders")
    assert isinstance(missing, TableInputs) and missing.storage_options is None
    assert missing.secret_error is not None and "no Secret 'lake-credentials'" in str(missing.secret_error)
    harness.put_secret("lake-credentials", "options.json", json.dumps({"endpoint_url": "http://s3"}))
    found = inputs("LakeTable", "orders")
    assert isinstance(found, TableInputs) and found.secret_error is None
    assert found.storage_options == {"endpoint_url": "http://s3"}
    ran = inputs("TableService", service["metadata"]["name"])
    assert isinstance(ran, ServiceInputs) and ran.storage_options == {"endpoint_url": "http://s3"}
    assert ran.table_name == "orders"
    harness.put_secret("not-json", "options.json", "endpoint_url=http://s3")
    # a table of its own location (one of "orders"' would be LocationInUse, whichever the Secret)
    harness.put({**lake_table(location="s3://lake/garbled",
                              storage={"secretRef": {"name": "not-json", "key": "options.json"}}),
                 "metadata": {**table["metadata"], "name": "garbled", "uid": "uid-garbled"}})
    garbled = inputs("LakeTable", "garbled")
    assert isinstance(garbled, TableInputs) and "is not a JSON object" in str(garbled.secret_error)


def test_weir_runs_store_gives_this_process_zookeeper_credentials(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    harness = local_harness(tmp_path)
    harness.put(lake_table(lock={"provider": "zookeeper", "zookeeper": {"connect": "zk:2181"}}))
    body = harness.store.get("LakeTable", NAMESPACE, "orders") or {}
    monkeypatch.setenv("WEIR_ZOOKEEPER_USERNAME", "tenant-a")
    monkeypatch.setenv("WEIR_ZOOKEEPER_PASSWORD", "secret-a")
    observed = observe(harness.store, "LakeTable", body)
    assert isinstance(observed, TableInputs)
    assert (observed.zookeeper_credentials.username, observed.zookeeper_error) == ("tenant-a", None)
    monkeypatch.delenv("WEIR_ZOOKEEPER_PASSWORD")
    half = observe(harness.store, "LakeTable", body)
    assert isinstance(half, TableInputs) and half.zookeeper_credentials is None
    assert half.zookeeper_error is not None and "WEIR_ZOOKEEPER_PASSWORD" in half.zookeeper_error
