"""What the process kubelet reports: Node and Pod status bodies, as a kubelet writes them.

Pure functions (no I/O but reading the clock): the kubelet (kubelet.py) decides when, these say what. A
real API server validates every field (container names match the spec, a terminal phase is final, podIP
equals podIPs[0], ...), so the bodies are complete, not just what a test reads.
"""

from __future__ import annotations

import datetime
import os
from typing import Any

POD_IP = "127.0.0.1"
KUBELET_VERSION = "process-kubelet"


def now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_status(node_name: str, kubelet_port: int | None = None) -> dict[str, Any]:
    """A Ready node on 127.0.0.1 with this machine's CPUs and memory (and its kubelet endpoint, when
    the API server reaches pods' logs through it)."""
    stamp = now()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    resources = {"cpu": str(os.cpu_count() or 1), "memory": f"{memory // 1024}Ki", "pods": "110"}
    status: dict[str, Any] = {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                        "message": "the process kubelet runs pods as local processes",
                        "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}],
        "addresses": [{"type": "InternalIP", "address": POD_IP}, {"type": "Hostname", "address": node_name}],
        "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": "", "operatingSystem": "linux",
                     "architecture": "amd64", "containerRuntimeVersion": "process://", "osImage": "",
                     "kernelVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
    }
    if kubelet_port is not None:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": kubelet_port}}
    return status


def container_status(container: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": container.get("name", "main"),
        "image": container.get("image", ""),
        "imageID": "",
        "ready": "running" in state,
        "restartCount": 0,
        "started": "running" in state,
        "state": state,
    }


def waiting(base: dict[str, Any], container: dict[str, Any], reason: str, message: str) -> dict[str, Any]:
    """Pending with the container waiting (ImagePullBackOff, CreateContainerConfigError)."""
    state = {"waiting": {"reason": reason, "message": message}}
    return {**base, "phase": "Pending", "containerStatuses": [container_status(container, state)]}


def running(base: dict[str, Any], container: dict[str, Any], started: str) -> dict[str, Any]:
    return {
        **base,
        "phase": "Running",
        "podIP": POD_IP,
        "podIPs": [{"ip": POD_IP}],
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}],
        "containerStatuses": [container_status(container, {"running": {"startedAt": started}})],
    }


def terminated(base: dict[str, Any], container: dict[str, Any], *, exit_code: int, reason: str,
               started: str | None = None, message: str = "", with_ip: bool = True) -> dict[str, Any]:
    """Succeeded (exit 0) or Failed, with the container's terminated state (a process that never started
    has no startedAt and no pod IP)."""
    state = {"exitCode": exit_code, "reason": reason, **({"startedAt": started} if started else {}),
             "finishedAt": now(), **({"message": message} if message else {})}
    return {
        **base,
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        **({"podIP": POD_IP, "podIPs": [{"ip": POD_IP}]} if with_ip else {}),
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now()}],
        "containerStatuses": [container_status(container, {"terminated": state})],
    }


def exit_code_of(returncode: int) -> int:
    """A process killed by signal N reports 128+N, as containers do."""
    return 128 - returncode if returncode < 0 else returncode


def termination_message(container: dict[str, Any], message: bytes, log_tail: bytes, exit_code: int) -> str:
    """What a kubelet reports as the terminated container's message: the termination message file (up to
    4096 bytes), or with terminationMessagePolicy FallbackToLogsOnError and a failed container whose
    file is empty, the end of its log (up to 80 lines, 2048 bytes)."""
    text = message[:4096].decode("utf-8", "replace")
    fallback = container.get("terminationMessagePolicy") == "FallbackToLogsOnError"
    if not text and exit_code != 0 and fallback:
        text = b"\n".join(log_tail[-2048:].splitlines()[-80:]).decode("utf-8", "replace")
    return text
