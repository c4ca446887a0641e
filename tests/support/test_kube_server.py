"""The real control plane of the tests: the pinned release, RBAC with service-account tokens from the
TokenRequest API, the controller-manager's garbage collection, and every process stopped by pid."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.support import kube_server
from tests.support.fixtures import require_controlplane
from tests.support.kube_client import KubeClientError, resource_path
from tests.support.kube_server import ControlPlane, kubernetes_version
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.k8s


def test_the_server_is_the_release_go_mod_pins(kube_server: ControlPlane) -> None:
    version = kube_server.client().get("/version")
    assert version["gitVersion"] == kubernetes_version() == "v1.37.2"
    assert (version["major"], version["minor"]) == ("1", "37")


def test_a_service_account_token_has_exactly_the_rights_rbac_grants(
    kube_server: ControlPlane, kube_namespace: str, kube_tools: Path, tmp_path: Path
) -> None:
    admin, ns = kube_server.client(), kube_namespace
    admin.create(resource_path("v1", "serviceaccounts", ns), {"metadata": {"name": "reader"}})
    admin.create(resource_path("rbac.authorization.k8s.io/v1", "roles", ns), {
        "metadata": {"name": "read-configmaps"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]})
    admin.create(resource_path("rbac.authorization.k8s.io/v1", "rolebindings", ns), {
        "metadata": {"name": "reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-configmaps"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}]})
    token = kube_server.token(ns, "reader")
    reader = kube_server.client(token=token)
    review = reader.create("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{ns}:reader"
    assert reader.get(resource_path("v1", "configmaps", ns))["items"] is not None
    with pytest.raises(KubeClientError) as refused:
        reader.get(resource_path("v1", "secrets", ns))
    assert refused.value.status == 403
    assert f'User "system:serviceaccount:{ns}:reader" cannot list resource "secrets"' in \
        refused.value.body["message"]
    # the same token in a kubeconfig, as a process (the operator) would use it
    kubectl = Kubectl(kube_tools / "kubectl",
                      kube_server.write_kubeconfig(tmp_path / "reader", namespace=ns, token=token))
    assert kubectl.run("auth", "can-i", "list", "configmaps").stdout.strip() == "yes"
    assert kubectl.run("auth", "can-i", "list", "secrets", check=False).stdout.strip() == "no"


def test_the_garbage_collector_deletes_what_a_deleted_owner_owned(kube_server: ControlPlane,
                                                                  kube_namespace: str) -> None:
    client, ns = kube_server.client(), kube_namespace
    owner = client.create(resource_path("v1", "configmaps", ns), {"metadata": {"name": "owner"}})
    reference = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    client.create(resource_path("v1", "configmaps", ns),
                  {"metadata": {"name": "owned", "ownerReferences": [reference]}})
    client.delete(resource_path("v1", "configmaps", ns, "owner"))
    client.wait_deleted(resource_path("v1", "configmaps", ns, "owned"), timeout=30)


def test_a_new_namespace_gets_its_default_service_account_and_root_ca(kube_server: ControlPlane,
                                                                        kube_namespace: str) -> None:
    client = kube_server.client()
    config = client.wait_for(resource_path("v1", "configmaps", kube_namespace, "kube-root-ca.crt"), bool)
    assert config["data"]["ca.crt"] == kube_server.ca.cert.read_text()


def test_the_admin_kubeconfig_is_self_contained(kube_server: ControlPlane, kube_tools: Path,
                                                tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere"
    moved.write_text(kube_server.kubeconfig.read_text())  # certificates inline: any copy works
    user = yaml.safe_load(moved.read_text())["users"][0]["user"]
    assert set(user) == {"client-certificate-data", "client-key-data"}
    done = Kubectl(kube_tools / "kubectl", moved).run("version", "-o", "json")
    assert '"gitVersion": "v1.37.2"' in done.stdout and "WARNING" not in done.stderr


def test_stop_ends_every_process_it_started(tmp_path: Path) -> None:
    require_controlplane()
    with ControlPlane(tmp_path) as server:
        pids = [c.process.pid for c in server.components if c.process is not None]
        assert len(pids) == 3
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)


def test_a_server_that_cannot_start_is_stopped_and_its_log_shown(tmp_path: Path) -> None:
    require_controlplane()
    server = ControlPlane(tmp_path, extra_apiserver_args=["--no-such-flag"])
    with pytest.raises(RuntimeError, match=r"(?s)kube-apiserver exited with 1; .*unknown flag: --no-such"):
        server.start()
    for component in server.components:
        assert component.process is None or component.process.poll() is not None


def test_without_the_binary_the_reason_says_what_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = kube_server.ROOT / ".tools" / "none" / "controlplane"
    monkeypatch.setattr(kube_server, "binary_path", lambda: missing)
    monkeypatch.setattr(kube_server.shutil, "which", lambda name: "/usr/bin/go")
    expected = (".tools/none/controlplane is not built: run `make controlplane` "
                "(cold Go caches: 15-25 min; warm: 15-35 s)")
    assert kube_server.controlplane_missing_reason() == expected
    monkeypatch.setattr(kube_server.shutil, "which", lambda name: None)
    assert "Go is not installed" in (kube_server.controlplane_missing_reason() or "")
