"""A real kopf operator, over HTTP, reacts to custom resources in the emulator and patches their status."""

from __future__ import annotations

from typing import Any

import kopf
import pytest
from kopf.testing import KopfRunner

from tests.support.kube_api import KubeApi
from tests.support.test_kube_api import CRD, WIDGETS, widget

pytestmark = pytest.mark.k8s


def test_a_kopf_operator_handles_a_created_resource_and_its_deletion(kube_api: KubeApi) -> None:
    client = kube_api.client()
    client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    registry = kopf.OperatorRegistry()
    deleted: list[str] = []

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        connection: kopf.ConnectionInfo = kube_api.kopf_connection()
        return connection

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # k8s-event posting is not covered here (see the kube_api docstring)
        settings.watching.server_timeout = 5

    @kopf.on.create("example.dev", "v1", "widgets", registry=registry)
    def created(spec: kopf.Spec, patch: kopf.Patch, **_: Any) -> None:
        patch.status["phase"] = "Ready"
        patch.status["size"] = spec["size"] * 2

    @kopf.on.delete("example.dev", "v1", "widgets", registry=registry)
    def removed(name: str, **_: Any) -> None:
        deleted.append(name)

    args = ["run", "--standalone", "--namespace=default", "--verbose"]
    with KopfRunner(args, registry=registry, timeout=60) as runner:
        client.create(WIDGETS, widget("w1", size=21))
        ready = client.wait_for(f"{WIDGETS}/w1", lambda o: o.get("status", {}).get("phase") == "Ready")
        assert ready["metadata"]["finalizers"] == ["kopf.zalando.org/KopfFinalizerMarker"]
        client.delete(f"{WIDGETS}/w1")
        client.wait_deleted(f"{WIDGETS}/w1")
    assert ready["status"]["size"] == 42
    assert deleted == ["w1"]
    assert runner.exception is None, runner.output

