"""kube.py against a real API server: the error semantics the reconcile core's idempotence builds on.
A missing object reads as None; creating a pod that exists is success (its name is the submission);
deleting a missing pod is success; a status written from a stale read fails with Conflict; Events land
on their object; an unreachable API server is a KubeError that says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeoperator.kube import Conflict, Kube, KubeError, connect
from tests.support.kube_server import ControlPlane
from tests.support.operator import CRDS, events_of, weir_path

pytestmark = pytest.mark.k8s


def pod(name: str, namespace: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "driver", "image": "x"}]}}


def test_the_api_semantics(kube_server: ControlPlane, kube_namespace: str, tmp_path: Path) -> None:
    kube_server.apply_crds(*CRDS)
    ns = kube_namespace
    kube = Kube(connect(str(kube_server.write_kubeconfig(tmp_path / "kubeconfig", namespace=ns))))
    client = kube_server.client()
    assert kube.get("LakeTable", ns, "nope") is None
    assert kube.get_pod(ns, "nope") is None
    kube.delete_pod(ns, "nope")

    kube.create_pod(pod("d1", ns))
    first = kube.get_pod(ns, "d1")
    kube.create_pod({**pod("d1", ns), "spec": {"containers": [{"name": "driver", "image": "other"}]}})
    assert kube.get_pod(ns, "d1") == first   # the existing pod is kept as it is

    body = client.create(weir_path("LakeTable", namespace=ns), {
        "apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable", "metadata": {"name": "t"},
        "spec": {"location": "/x", "recordKey": ["id"], "schema": [{"name": "id", "type": "int64"}]}})
    written = kube.replace_status(body, {"phase": "Pending"})
    assert written["status"] == {"phase": "Pending"}
    with pytest.raises(Conflict):
        kube.replace_status(body, {"phase": "Ready"})   # planned from the first read: stale
    assert kube.get("LakeTable", ns, "t")["status"] == {"phase": "Pending"}
    with_finalizer = kube.set_finalizers(written, ["weir.dev/delete-data"])
    assert with_finalizer["metadata"]["finalizers"] == ["weir.dev/delete-data"]
    with pytest.raises(Conflict):
        kube.set_finalizers(written, [])

    kube.post_event(written, "Warning", "InvalidSpec", "spec.recordKey: required; add it")
    events = events_of(client, ns, "t")
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "InvalidSpec")]
    assert events[0]["involvedObject"]["uid"] == body["metadata"]["uid"]


def test_an_unreachable_api_server_is_a_kube_error(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                      "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
                      "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
                      "users: [{name: u, user: {token: t}}]\n")
    kube = Kube(connect(str(config)), timeout_s=2)
    with pytest.raises(KubeError, match="could not be reached"):
        kube.get("LakeTable", "default", "t")


def test_a_missing_kubeconfig_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(KubeError, match="--kubeconfig"):
        connect(str(tmp_path / "absent"))
