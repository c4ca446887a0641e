"""The process kubelet runs Pods as local processes and reports them through the real API server (which
validates every status it writes and waits for it to finish deleted pods)."""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.kube_client import KubeClient, KubeServer, resource_path
from tests.support.kube_server import ControlPlane
from tests.support.kubelet import ProcessKubelet

pytestmark = pytest.mark.k8s
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Pods:
    """A test's pods: the server, its admin client, the namespace and its pods' path."""

    server: KubeServer
    client: KubeClient
    namespace: str

    @property
    def path(self) -> str:
        return resource_path("v1", "pods", self.namespace)

    def kubelet(self, log_dir: Path, **options: Any) -> ProcessKubelet:
        return ProcessKubelet(self.server, log_dir, cwd=ROOT, python_path=[ROOT, ROOT / "operator"],
                              namespace=self.namespace, **options)


@pytest.fixture
def pods(kube_server: ControlPlane, kube_namespace: str) -> Pods:
    return Pods(kube_server, kube_server.client(), kube_namespace)


@pytest.fixture
def kubelet(pods: Pods, tmp_path: Path) -> Iterator[ProcessKubelet]:
    with pods.kubelet(tmp_path / "pod-logs") as kubelet:
        yield kubelet


def pod(
    name: str,
    code: str,
    *,
    image: str = "weir/spark:test",
    env: list[dict[str, Any]] | None = None,
    grace: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "driver",
                "image": image,
                "command": [sys.executable],
                "args": ["-c", code],
                "env": env or [],
            }
        ],
    }
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def finished(obj: dict[str, Any]) -> bool:
    return obj.get("status", {}).get("phase") in {"Succeeded", "Failed"}


def is_running(obj: dict[str, Any]) -> bool:
    return obj.get("status", {}).get("phase") == "Running"


def has_container_status(obj: dict[str, Any]) -> bool:
    return bool(obj.get("status", {}).get("containerStatuses"))


def terminated(obj: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = obj["status"]["containerStatuses"][0]["state"]["terminated"]
    return state


def test_a_pod_that_exits_0_succeeds_with_its_env_resolved(pods: Pods, kubelet: ProcessKubelet) -> None:
    client, ns = pods.client, pods.namespace
    client.create(
        resource_path("v1", "secrets", ns),
        {"metadata": {"name": "creds"}, "data": {"options": base64.b64encode(b'{"key": "s3cr3t"}').decode()}},
    )
    client.create(resource_path("v1", "configmaps", ns),
                  {"metadata": {"name": "conf"}, "data": {"mode": "batch"}})
    env: list[dict[str, Any]] = [
        {"name": "LITERAL", "value": "1"},
        {"name": "STORAGE", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "options"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "mode"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    code = "import os, sparkjobs; print(*(os.environ[k] for k in ('LITERAL','STORAGE','MODE','IP')))"
    client.create(pods.path, pod("ok", code, env=env))
    done = client.wait_for(f"{pods.path}/ok", finished)
    assert done["status"]["phase"] == "Succeeded"
    assert terminated(done)["exitCode"] == 0 and terminated(done)["reason"] == "Completed"
    assert done["status"]["podIP"] == "127.0.0.1" and done["spec"]["nodeName"] == kubelet.node_name
    assert kubelet.log_of(ns, "ok").strip() == '1 {"key": "s3cr3t"} batch 127.0.0.1'


def test_a_pod_is_bound_to_the_kubelets_ready_node_and_succeeds_with_its_termination_message(
    pods: Pods, kubelet: ProcessKubelet
) -> None:
    code = ("import json, os, pathlib\n"
            "pathlib.Path(os.environ['WEIR_TERMINATION_LOG']).write_text(json.dumps({'outcome': 'ok'}))\n")
    pods.client.create(pods.path, pod("told", code))
    done = pods.client.wait_for(f"{pods.path}/told", finished)
    state = terminated(done)
    assert done["status"]["phase"] == "Succeeded"
    assert (state["exitCode"], state["reason"]) == (0, "Completed")
    assert json.loads(state["message"]) == {"outcome": "ok"}
    assert state["startedAt"] <= state["finishedAt"]
    conditions = {c["type"]: c["status"] for c in done["status"]["conditions"]}
    assert conditions == {"PodScheduled": "True", "Ready": "False"}  # bound, then finished
    node = pods.client.get(resource_path("v1", "nodes", name=kubelet.node_name))
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
    address = node["status"]["addresses"][0]["address"]
    assert (ready, address, node["spec"].get("taints")) == ("True", "127.0.0.1", None)


def test_a_pod_that_exits_3_fails_with_that_exit_code(pods: Pods, kubelet: ProcessKubelet) -> None:
    pods.client.create(pods.path, pod("conflict", "raise SystemExit(3)"))
    done = pods.client.wait_for(f"{pods.path}/conflict", finished)
    assert done["status"]["phase"] == "Failed"
    assert terminated(done)["exitCode"] == 3 and terminated(done)["reason"] == "Error"


def test_a_running_pod_reports_running_then_dies_on_delete_and_is_removed(
    pods: Pods, kubelet: ProcessKubelet, tmp_path: Path
) -> None:
    marker, ready = tmp_path / "terminated", tmp_path / "ready"
    os.mkfifo(ready)
    code = (
        "import signal, sys, time, pathlib\n"
        f"signal.signal(signal.SIGTERM, lambda *a: (pathlib.Path({str(marker)!r}).write_text('x'), "
        "sys.exit(0)))\n"
        f"pathlib.Path({str(ready)!r}).write_text('up')\n"
        "while True: time.sleep(1)\n"
    )
    pods.client.create(pods.path, pod("long", code, grace=30))
    running = pods.client.wait_for(f"{pods.path}/long", is_running)
    assert "running" in running["status"]["containerStatuses"][0]["state"]
    assert ready.read_text() == "up"  # blocks until the handler is installed
    process = kubelet.pods[(pods.namespace, "long")].process
    pods.client.delete(f"{pods.path}/long")
    assert process.wait(30) == 0
    assert marker.read_text() == "x"  # it got SIGTERM first
    pods.client.wait_deleted(f"{pods.path}/long")  # a real API server waits for the kubelet to finish it


def test_a_pod_ignoring_sigterm_is_killed_after_its_grace_period(
    pods: Pods, kubelet: ProcessKubelet, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    os.mkfifo(ready)
    code = (
        "import pathlib, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"pathlib.Path({str(ready)!r}).write_text('up')\nwhile True: time.sleep(1)\n"
    )
    pods.client.create(pods.path, pod("stubborn", code, grace=1))
    pods.client.wait_for(f"{pods.path}/stubborn", is_running)
    assert ready.read_text() == "up"  # SIGTERM is ignored from here on
    process = kubelet.pods[(pods.namespace, "stubborn")].process
    pods.client.delete(f"{pods.path}/stubborn")
    assert process.wait(30) == -9
    pods.client.wait_deleted(f"{pods.path}/stubborn")


def test_an_oom_killed_pod_fails_as_oomkilled(pods: Pods, kubelet: ProcessKubelet) -> None:
    pods.client.create(pods.path, pod("hungry", "import time\nwhile True: time.sleep(1)\n"))
    pods.client.wait_for(f"{pods.path}/hungry", is_running)
    kubelet.oom_kill(pods.namespace, "hungry")
    done = pods.client.wait_for(f"{pods.path}/hungry", finished)
    assert done["status"]["phase"] == "Failed"
    assert (terminated(done)["reason"], terminated(done)["exitCode"]) == ("OOMKilled", 137)


def test_an_image_that_never_pulls_stays_pending_in_image_pull_back_off(pods: Pods, tmp_path: Path) -> None:
    with pods.kubelet(tmp_path / "logs", image_pull_failures=r"^missing/"):
        pods.client.create(pods.path, pod("nopull", "print('never')", image="missing/spark:1"))
        waiting = pods.client.wait_for(f"{pods.path}/nopull", has_container_status)
        assert waiting["status"]["phase"] == "Pending"
        assert waiting["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
        pods.client.delete(f"{pods.path}/nopull")  # a pod that never ran is finished by its kubelet too
        pods.client.wait_deleted(f"{pods.path}/nopull")
    assert not (tmp_path / "logs" / f"{pods.namespace}_nopull.log").exists()


def test_a_missing_secret_key_is_a_config_error(pods: Pods, kubelet: ProcessKubelet) -> None:
    env = [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}]
    pods.client.create(pods.path, pod("noconf", "print('never')", env=env))
    waiting = pods.client.wait_for(f"{pods.path}/noconf", has_container_status)
    assert (
        waiting["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
        == "CreateContainerConfigError"
    )


def test_stop_kills_every_process_it_started(pods: Pods, tmp_path: Path) -> None:
    kubelet = pods.kubelet(tmp_path / "logs", grace_seconds=0).start()
    pods.client.create(pods.path, pod("orphan", "import time\nwhile True: time.sleep(1)\n"))
    pods.client.wait_for(f"{pods.path}/orphan", is_running)
    process = kubelet.pods[(pods.namespace, "orphan")].process
    kubelet.stop()
    assert process.poll() is not None
    assert not kubelet.watching  # no stream left open on a server other tests share


def test_pods_created_after_the_watch_ended_still_run(pods: Pods, tmp_path: Path) -> None:
    with pods.kubelet(tmp_path / "logs", watch_seconds=1):
        time.sleep(2.5)  # the server ended the first watch (or two); the kubelet resumed
        pods.client.create(pods.path, pod("later", "print('ran')"))
        done = pods.client.wait_for(f"{pods.path}/later", finished)
    assert done["status"]["phase"] == "Succeeded"


def test_a_pod_runs_a_sparkjobs_entry_point_from_this_checkout(pods: Pods, kubelet: ProcessKubelet) -> None:
    spec = pod("job", "")
    spec["spec"]["containers"][0].update(command=["python", "-m", "sparkjobs.batch_write"], args=[])
    pods.client.create(pods.path, spec)
    done = pods.client.wait_for(f"{pods.path}/job", finished)
    assert terminated(done)["exitCode"] == 2  # bad input: the job ran and rejected its missing arguments
    assert '"outcome": "bad_input"' in kubelet.log_of(pods.namespace, "job")
