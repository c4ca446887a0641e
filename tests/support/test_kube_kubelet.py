"""The process kubelet runs the emulator's Pods as local processes and reports them through the API."""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.kube_api import KubeApi, KubeClient
from tests.support.kubelet import ProcessKubelet

pytestmark = pytest.mark.k8s

PODS = "/api/v1/namespaces/default/pods"


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


def terminated(obj: dict[str, Any]) -> dict[str, Any]:
    state: dict[str, Any] = obj["status"]["containerStatuses"][0]["state"]["terminated"]
    return state


@pytest.fixture
def client(kube_api: KubeApi) -> KubeClient:
    return kube_api.client()


def test_a_pod_that_exits_0_succeeds_with_its_env_resolved(
    kube_api: KubeApi, kubelet: ProcessKubelet, client: KubeClient
) -> None:
    client.create(
        "/api/v1/namespaces/default/secrets",
        {"metadata": {"name": "creds"}, "data": {"options": base64.b64encode(b'{"key": "s3cr3t"}').decode()}},
    )
    client.create(
        "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "conf"}, "data": {"mode": "batch"}}
    )
    env: list[dict[str, Any]] = [
        {"name": "LITERAL", "value": "1"},
        {"name": "STORAGE", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "options"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "mode"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    code = "import os, sparkjobs; print(*(os.environ[k] for k in ('LITERAL','STORAGE','MODE','IP')))"
    client.create(PODS, pod("ok", code, env=env))
    done = client.wait_for(f"{PODS}/ok", finished)
    assert done["status"]["phase"] == "Succeeded"
    assert terminated(done)["exitCode"] == 0 and terminated(done)["reason"] == "Completed"
    assert done["status"]["podIP"] == "127.0.0.1" and done["spec"]["nodeName"]
    assert kubelet.log_of("default", "ok").strip() == '1 {"key": "s3cr3t"} batch 127.0.0.1'


def test_a_pod_that_exits_3_fails_with_that_exit_code(kubelet: ProcessKubelet, client: KubeClient) -> None:
    client.create(PODS, pod("conflict", "raise SystemExit(3)"))
    done = client.wait_for(f"{PODS}/conflict", finished)
    assert done["status"]["phase"] == "Failed"
    assert terminated(done)["exitCode"] == 3 and terminated(done)["reason"] == "Error"


def test_a_running_pod_reports_running_then_dies_on_delete(
    kubelet: ProcessKubelet, client: KubeClient, tmp_path: Path
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
    client.create(PODS, pod("long", code, grace=30))
    running = client.wait_for(f"{PODS}/long", lambda o: o.get("status", {}).get("phase") == "Running")
    assert "running" in running["status"]["containerStatuses"][0]["state"]
    assert ready.read_text() == "up"  # blocks until the handler is installed
    process = kubelet.pods[("default", "long")].process
    client.delete(f"{PODS}/long")
    assert process.wait(30) == 0
    assert marker.read_text() == "x"  # it got SIGTERM first


def test_a_pod_ignoring_sigterm_is_killed_after_its_grace_period(
    kubelet: ProcessKubelet, client: KubeClient, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    os.mkfifo(ready)
    code = (
        "import pathlib, signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"pathlib.Path({str(ready)!r}).write_text('up')\nwhile True: time.sleep(1)\n"
    )
    client.create(PODS, pod("stubborn", code, grace=0))
    client.wait_for(f"{PODS}/stubborn", lambda o: o.get("status", {}).get("phase") == "Running")
    assert ready.read_text() == "up"  # SIGTERM is ignored from here on
    process = kubelet.pods[("default", "stubborn")].process
    client.delete(f"{PODS}/stubborn")
    assert process.wait(30) == -9


def test_an_oom_killed_pod_fails_as_oomkilled(kubelet: ProcessKubelet, client: KubeClient) -> None:
    client.create(PODS, pod("hungry", "import time\nwhile True: time.sleep(1)\n"))
    client.wait_for(f"{PODS}/hungry", lambda o: o.get("status", {}).get("phase") == "Running")
    kubelet.oom_kill("default", "hungry")
    done = client.wait_for(f"{PODS}/hungry", finished)
    assert done["status"]["phase"] == "Failed"
    assert (terminated(done)["reason"], terminated(done)["exitCode"]) == ("OOMKilled", 137)


def test_an_image_that_never_pulls_stays_pending_in_image_pull_back_off(
    kube_api: KubeApi, tmp_path: Path
) -> None:
    client = kube_api.client()
    with ProcessKubelet(kube_api, tmp_path / "logs", image_pull_failures=r"^missing/"):
        client.create(PODS, pod("nopull", "print('never')", image="missing/spark:1"))
        waiting = client.wait_for(
            f"{PODS}/nopull", lambda o: bool(o.get("status", {}).get("containerStatuses"))
        )
    assert waiting["status"]["phase"] == "Pending"
    assert waiting["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
    assert not (tmp_path / "logs" / "default_nopull.log").exists()


def test_a_missing_secret_key_is_a_config_error(kubelet: ProcessKubelet, client: KubeClient) -> None:
    env = [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k"}}}]
    client.create(PODS, pod("noconf", "print('never')", env=env))
    waiting = client.wait_for(f"{PODS}/noconf", lambda o: bool(o.get("status", {}).get("containerStatuses")))
    assert (
        waiting["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
        == "CreateContainerConfigError"
    )


def test_stop_kills_every_process_it_started(kube_api: KubeApi, tmp_path: Path) -> None:
    client = kube_api.client()
    kubelet = ProcessKubelet(kube_api, tmp_path / "logs", grace_seconds=0).start()
    client.create(PODS, pod("orphan", "import time\nwhile True: time.sleep(1)\n"))
    client.wait_for(f"{PODS}/orphan", lambda o: o.get("status", {}).get("phase") == "Running")
    process = kubelet.pods[("default", "orphan")].process
    kubelet.stop()
    assert process.poll() is not None


def test_a_pod_runs_a_sparkjobs_entry_point_from_this_checkout(
    kubelet: ProcessKubelet, client: KubeClient
) -> None:
    spec = pod("job", "")
    spec["spec"]["containers"][0].update(command=["python", "-m", "sparkjobs.batch_write"], args=[])
    client.create(PODS, spec)
    done = client.wait_for(f"{PODS}/job", finished)
    assert terminated(done)["exitCode"] == 2  # bad input: the job ran and rejected its missing arguments
    assert '"outcome": "bad_input"' in kubelet.log_of("default", "job")
