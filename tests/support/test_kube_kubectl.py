"""kubectl from the pinned wheel applies a CRD and a custom resource to the emulator and reads them back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.kubectl import Kubectl
from tests.support.kubelet import ProcessKubelet
from tests.support.test_kube_api import CRD, widget

pytestmark = pytest.mark.k8s


def test_kubectl_applies_a_crd_and_a_custom_resource(kubectl: Kubectl, tmp_path: Path) -> None:
    crd, manifest = tmp_path / "crd.yaml", tmp_path / "widgets.yaml"
    crd.write_text(yaml.safe_dump(CRD))  # as with a real server: the CRD first, then its resources
    manifest.write_text(yaml.safe_dump(widget("w1", {"app": "weir"}, size=3)))
    assert "widgets.example.dev created" in kubectl.apply(crd).stdout
    assert "widget.example.dev/w1 created" in kubectl.apply(manifest).stdout
    assert "w1" in kubectl.run("get", "widgets").stdout
    assert "widget.example.dev/w1 unchanged" in kubectl.apply(manifest).stdout
    manifest.write_text(yaml.safe_dump(widget("w1", {"app": "weir"}, size=4)))
    assert "widget.example.dev/w1 configured" in kubectl.apply(manifest).stdout
    got = json.loads(kubectl.run("get", "wd", "-l", "app=weir", "-o", "json").stdout)
    assert [
        (i["metadata"]["name"], i["spec"]["size"], i["metadata"]["generation"]) for i in got["items"]
    ] == [("w1", 4, 2)]
    server_side = kubectl.run("apply", "--server-side", "--validate=false", "-f", str(manifest))
    assert "serverside-applied" in server_side.stdout
    kubectl.run("delete", "widget", "w1")
    assert "No resources found" in kubectl.run("get", "widgets").stderr


def test_kubectl_and_helm_come_from_the_wheel(kubectl: Kubectl, kube_tools: Path) -> None:
    assert kubectl.binary.parent == kube_tools
    assert "Client Version: v1.37" in kubectl.run("version", "--client").stdout
    assert (kube_tools / "helm").stat().st_mode & 0o111


@pytest.mark.parametrize("server", ["emulator", "apiserver"])
def test_kubectl_logs_reads_a_pods_process_log(server: str, request: pytest.FixtureRequest) -> None:
    """A real API server asks the pod's kubelet (the process kubelet's log endpoint); the emulator reads
    the log file itself."""
    prefix = "" if server == "emulator" else "real_"
    kubectl: Kubectl = request.getfixturevalue(f"{prefix}kubectl")
    kubelet: ProcessKubelet = request.getfixturevalue(f"{prefix}kubelet")
    namespace = "default" if server == "emulator" else request.getfixturevalue("kube_namespace")
    client = kubelet.client
    client.create(
        f"/api/v1/namespaces/{namespace}/pods",
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
        f"/api/v1/namespaces/{namespace}/pods/talker",
        lambda o: o.get("status", {}).get("phase") in {"Succeeded", "Failed"},
    )
    assert kubectl.run("logs", "talker").stdout == "one\ntwo\n"
    assert kubectl.run("logs", "talker", "--tail=1").stdout == "two\n"
    assert kubectl.run("logs", "-f", "talker").stdout == "one\ntwo\n"  # follows until the process ended
