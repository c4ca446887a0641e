"""The Kubernetes API emulator serves what a real API server does for kopf, kubectl and the kubelet."""

from __future__ import annotations

import threading
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.kube_api import KubeApi, KubeClient, KubeClientError, secret_value

pytestmark = pytest.mark.k8s

WIDGETS = "/apis/example.dev/v1/namespaces/default/widgets"
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.dev"},
    "spec": {
        "group": "example.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object"}},
            }
        ],
    },
}


def widget(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.dev/v1",
        "kind": "Widget",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


@pytest.fixture
def client(kube_api: KubeApi) -> KubeClient:
    client = kube_api.client()
    client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    return client


def test_a_crd_registers_its_resource_in_discovery(client: KubeClient) -> None:
    resources = client.get("/apis/example.dev/v1")["resources"]
    assert {r["name"] for r in resources} == {"widgets", "widgets/status"}
    assert next(r for r in resources if r["name"] == "widgets")["shortNames"] == ["wd"]
    crd = client.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.dev")
    assert {c["type"] for c in crd["status"]["conditions"]} >= {"Established"}


def test_create_stamps_identity_and_get_list_return_it(client: KubeClient) -> None:
    created = client.create(WIDGETS, widget("w1", size=1))
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    assert client.get(f"{WIDGETS}/w1") == created
    listing = client.get(WIDGETS)
    assert [item["metadata"]["name"] for item in listing["items"]] == ["w1"]
    assert int(listing["metadata"]["resourceVersion"]) >= int(meta["resourceVersion"])
    with pytest.raises(KubeClientError) as conflict:
        client.create(WIDGETS, widget("w1"))
    assert conflict.value.status == 409


def test_generation_bumps_on_spec_changes_only_and_resource_version_on_every_write(
    client: KubeClient,
) -> None:
    first = client.create(WIDGETS, widget("w1", size=1))["metadata"]
    labelled = client.patch(f"{WIDGETS}/w1", {"metadata": {"labels": {"a": "b"}}})["metadata"]
    status = client.patch(f"{WIDGETS}/w1/status", {"status": {"phase": "Ready"}})["metadata"]
    resized = client.patch(f"{WIDGETS}/w1", {"spec": {"size": 2}})["metadata"]
    versions = [int(m["resourceVersion"]) for m in (first, labelled, status, resized)]
    assert versions == sorted(set(versions))
    assert [m["generation"] for m in (first, labelled, status, resized)] == [1, 1, 1, 2]
    unchanged = client.patch(f"{WIDGETS}/w1", {"spec": {"size": 2}})["metadata"]
    assert unchanged["resourceVersion"] == resized["resourceVersion"]


def test_status_is_isolated_from_the_main_resource(client: KubeClient) -> None:
    client.create(WIDGETS, {**widget("w1", size=1), "status": {"phase": "Forged"}})
    assert "status" not in client.get(f"{WIDGETS}/w1")
    after_status = client.patch(f"{WIDGETS}/w1/status", {"spec": {"size": 9}, "status": {"phase": "Ready"}})
    assert after_status["spec"] == {"size": 1} and after_status["status"] == {"phase": "Ready"}
    after_main = client.patch(f"{WIDGETS}/w1", {"spec": {"size": 2}, "status": {"phase": "Forged"}})
    assert after_main["status"] == {"phase": "Ready"}
    replaced = client.replace(f"{WIDGETS}/w1", {**after_main, "status": {"phase": "Forged"}})
    assert replaced["status"] == {"phase": "Ready"}


def test_json_patch_test_operation_is_a_precondition(client: KubeClient) -> None:
    created = client.create(WIDGETS, widget("w1", size=1))
    version = created["metadata"]["resourceVersion"]
    patched = client.patch(
        f"{WIDGETS}/w1",
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "add", "path": "/metadata/finalizers", "value": ["example.dev/f"]},
        ],
        kind="json",
    )
    assert patched["metadata"]["finalizers"] == ["example.dev/f"]
    with pytest.raises(KubeClientError) as stale:
        client.patch(
            f"{WIDGETS}/w1",
            [
                {"op": "test", "path": "/metadata/resourceVersion", "value": version},
                {"op": "remove", "path": "/metadata/finalizers"},
            ],
            kind="json",
        )
    assert stale.value.status == 422
    with pytest.raises(KubeClientError) as conflict:
        client.replace(f"{WIDGETS}/w1", created)  # an update on a stale resourceVersion
    assert conflict.value.status == 409


def test_strategic_merge_merges_named_lists(kube_api: KubeApi) -> None:
    client = kube_api.client()
    pods = "/api/v1/namespaces/default/pods"
    client.create(
        pods,
        {
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
        },
    )
    patched = client.patch(
        f"{pods}/p", {"spec": {"containers": [{"name": "b", "image": "z"}]}}, kind="strategic"
    )
    assert [(c["name"], c["image"]) for c in patched["spec"]["containers"]] == [("a", "x"), ("b", "z")]


def test_server_side_apply_creates_a_missing_object(client: KubeClient) -> None:
    created = client.patch(f"{WIDGETS}/applied", widget("applied", size=5), kind="apply")
    assert created["metadata"]["uid"] and client.get(f"{WIDGETS}/applied")["spec"] == {"size": 5}
    updated = client.patch(f"{WIDGETS}/applied", widget("applied", size=6), kind="apply")
    assert updated["metadata"]["generation"] == 2


def test_label_and_field_selectors(client: KubeClient) -> None:
    client.create(WIDGETS, widget("a", {"app": "weir", "tier": "writer"}))
    client.create(WIDGETS, widget("b", {"app": "weir", "tier": "service"}))
    client.create(WIDGETS, widget("c", {"app": "other"}))

    def names(**params: str) -> list[str]:
        return [item["metadata"]["name"] for item in client.get(WIDGETS, **params)["items"]]

    assert names(labelSelector="app=weir") == ["a", "b"]
    assert names(labelSelector="app=weir,tier!=writer") == ["b"]
    assert names(labelSelector="tier in (writer,service)") == ["a", "b"]
    assert names(labelSelector="tier notin (writer)") == ["b", "c"]
    assert names(labelSelector="!tier") == ["c"]
    assert names(labelSelector="tier") == ["a", "b"]
    assert names(fieldSelector="metadata.name=b") == ["b"]


def test_watch_resumes_from_a_resource_version_and_filters(client: KubeClient) -> None:
    start = client.get(WIDGETS)["metadata"]["resourceVersion"]
    client.create(WIDGETS, widget("a", {"app": "weir"}))
    client.create(WIDGETS, widget("b", {"app": "other"}))
    client.patch(f"{WIDGETS}/a", {"spec": {"size": 1}})
    client.delete(f"{WIDGETS}/a")
    events = client.watch(WIDGETS, resourceVersion=start, labelSelector="app=weir", timeoutSeconds="1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("MODIFIED", "a"),
        ("DELETED", "a"),
    ]
    current = client.watch(WIDGETS, timeoutSeconds="1")  # no version: the current state first
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in current] == [("ADDED", "b")]


def test_a_watch_sees_writes_made_after_it_started(client: KubeClient) -> None:
    start = client.get(WIDGETS)["metadata"]["resourceVersion"]
    stream = client.watch(WIDGETS, resourceVersion=start)
    assert isinstance(stream, Generator)
    writer = threading.Thread(target=client.create, args=(WIDGETS, widget("late")))
    writer.start()
    first = next(stream)
    writer.join()
    stream.close()
    assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "late")


def test_finalizers_hold_deletion_until_removed(client: KubeClient) -> None:
    client.create(WIDGETS, {**widget("w1"), "metadata": {"name": "w1", "finalizers": ["example.dev/f"]}})
    client.delete(f"{WIDGETS}/w1")
    held = client.get(f"{WIDGETS}/w1")
    assert held["metadata"]["deletionTimestamp"]
    client.patch(f"{WIDGETS}/w1", {"metadata": {"finalizers": None}})
    with pytest.raises(KubeClientError) as gone:
        client.get(f"{WIDGETS}/w1")
    assert gone.value.status == 404


def test_deleting_an_owner_collects_its_dependents(client: KubeClient) -> None:
    owner = client.create(WIDGETS, widget("owner"))
    reference = {
        "apiVersion": "example.dev/v1",
        "kind": "Widget",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
    }
    pods = "/api/v1/namespaces/default/pods"
    client.create(
        pods,
        {
            "metadata": {"name": "child", "ownerReferences": [reference]},
            "spec": {"containers": [{"name": "c"}]},
        },
    )
    client.create(
        pods,
        {
            "metadata": {"name": "held", "ownerReferences": [reference], "finalizers": ["example.dev/f"]},
            "spec": {"containers": [{"name": "c"}]},
        },
    )
    client.create(pods, {"metadata": {"name": "free"}, "spec": {"containers": [{"name": "c"}]}})
    client.delete(f"{WIDGETS}/owner")
    remaining = {item["metadata"]["name"]: item for item in client.get(pods)["items"]}
    assert set(remaining) == {"held", "free"}
    assert remaining["held"]["metadata"]["deletionTimestamp"]


def weir_crd(kind: str, plural: str, short: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.weir.dev"},
        "spec": {
            "group": "weir.dev",
            "scope": "Namespaced",
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "shortNames": [short],
                "categories": ["weir"],
            },
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }


def test_the_weir_crds_are_served_from_their_yaml(kube_api: KubeApi, tmp_path: Path) -> None:
    manifest = tmp_path / "crds.yaml"
    manifest.write_text(
        yaml.safe_dump_all(
            [
                weir_crd("LakeTable", "laketables", "lt"),
                weir_crd("LakeWriter", "lakewriters", "lw"),
                weir_crd("TableService", "tableservices", "lts"),
            ]
        )
    )
    assert kube_api.apply_crds(manifest) == [
        "laketables.weir.dev",
        "lakewriters.weir.dev",
        "tableservices.weir.dev",
    ]
    resources = kube_api.client().get("/apis/weir.dev/v1alpha1")["resources"]
    served = {r["name"]: (r["kind"], r["shortNames"], r["namespaced"]) for r in resources}
    assert served == {
        "laketables": ("LakeTable", ["lt"], True),
        "laketables/status": ("LakeTable", [], True),
        "lakewriters": ("LakeWriter", ["lw"], True),
        "lakewriters/status": ("LakeWriter", [], True),
        "tableservices": ("TableService", ["lts"], True),
        "tableservices/status": ("TableService", [], True),
    }
    assert "weir.dev" in {group["name"] for group in kube_api.client().get("/apis")["groups"]}


def test_a_secrets_string_data_is_stored_as_data(kube_api: KubeApi) -> None:
    client = kube_api.client()
    secret = client.create(
        "/api/v1/namespaces/default/secrets",
        {"metadata": {"name": "s"}, "stringData": {"options": '{"a": 1}'}},
    )
    assert "stringData" not in secret and secret_value(secret, "options") == '{"a": 1}'


def test_deleting_a_crd_removes_its_resource_and_objects(client: KubeClient) -> None:
    client.create(WIDGETS, widget("w1"))
    client.delete("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.dev")
    with pytest.raises(KubeClientError) as gone:
        client.get("/apis/example.dev/v1")
    assert gone.value.status == 404
    client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    assert client.get(WIDGETS)["items"] == []
