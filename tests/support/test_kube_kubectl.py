"""kubectl from the pinned wheel applies a CRD and a custom resource to the real API server, reads them
back, and reads a pod's log from the process kubelet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.kube_server import ControlPlane
from tests.support.kubectl import Kubectl
from tests.support.kubelet import ProcessKubelet
from tests.support.widgets import crd_file, widget

pytestmark = pytest.mark.k8s
GROUP = "kubectl.example.dev"


def test_kubectl_applies_a_crd_and_a_custom_resource(real_kubectl: Kubectl, kube_server: ControlPlane,
                                                     tmp_path: Path) -> None:
    kubectl, manifest = real_kubectl, tmp_path / "widgets.yaml"
    crd = crd_file(GROUP, tmp_path)   # as always: the CRD first (Established), then its resources
    assert f"widgets.{GROUP} created" in kubectl.apply(crd).stdout
    kubectl.run("wait", "--for=condition=Established", f"crd/widgets.{GROUP}")
    manifest.write_text(yaml.safe_dump(widget(GROUP, "w1", {"app": "weir"}, size=3)))
    assert f"widget.{GROUP}/w1 created" in kubectl.apply(manifest).stdout
    assert "w1" in kubectl.run("get", f"widgets.{GROUP}").stdout
    assert f"widget.{GROUP}/w1 unchanged" in kubectl.apply(manifest).stdout
    manifest.write_text(yaml.safe_dump(widget(GROUP, "w1", {"app": "weir"}, size=4)))
    assert f"widget.{GROUP}/w1 configured" in kubectl.apply(manifest).stdout
    got = json.loads(kubectl.run("get", f"widgets.{GROUP}", "-l", "app=weir", "-o", "json").stdout)
    assert [
        (i["metadata"]["name"], i["spec"]["size"], i["metadata"]["generation"]) for i in got["items"]
    ] == [("w1", 4, 2)]
    server_side = kubectl.run("apply", "--server-side", "-f", str(manifest))
    assert "serverside-applied" in server_side.stdout
    kubectl.run("delete", f"widget.{GROUP}", "w1")
    assert "No resources found" in kubectl.run("get", f"widgets.{GROUP}").stderr
    kubectl.run("delete", "-f", str(crd))


def test_kubectl_and_helm_come_from_the_wheel(kube_tools: Path) -> None:
    kubectl = Kubectl(kube_tools / "kubectl", Path("/nonexistent"))
    assert "Client Version: v1.37" in kubectl.run("version", "--client").stdout
    assert (kube_tools / "helm").stat().st_mode & 0o111


def test_kubectl_logs_reads_a_pods_process_log(real_kubectl: Kubectl, real_kubelet: ProcessKubelet,
                                               kube_namespace: str) -> None:
    """The API server asks the pod's kubelet (the process kubelet's log endpoint, kubelet_logs.py)."""
    kubectl, client = real_kubectl, real_kubelet.client
    client.create(
        f"/api/v1/namespaces/{kube_namespace}/pods",
        {
            "metadata": {"name": "talker"},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "weir/spark:test",
                        "command": ["python", "-c", "print('one'); print('two')"],
                    }
                ],
            },
        },
    )
    client.wait_for(
        f"/api/v1/namespaces/{kube_namespace}/pods/talker",
        lambda o: o.get("status", {}).get("phase") in {"Succeeded", "Failed"},
    )
    assert kubectl.run("logs", "talker").stdout == "one\ntwo\n"
    assert kubectl.run("logs", "talker", "--tail=1").stdout == "two\n"
    assert kubectl.run("logs", "-f", "talker").stdout == "one\ntwo\n"  # follows until the process ended
