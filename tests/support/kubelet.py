"""A process kubelet for tests: runs the Pods created in the API emulator as local processes.

Owns the pod lifecycle against `tests.support.kube_api`: it watches Pods, claims each unassigned one
(spec.nodeName), runs its first container's command+args with its env (literals, secretKeyRef and
configMapKeyRef read from the API, fieldRef status.podIP/metadata.*) on top of the test process's
environment, and reports Pending -> Running -> Succeeded/Failed with the container's exit code through
the `/status` subresource. Deleting a Pod stops its process (SIGTERM, SIGKILL after the grace period).
Tests can make images never pull (`image_pull_failures`: ImagePullBackOff) and end a pod as OOMKilled.
Each process logs to `<log_dir>/<namespace>_<pod>.log` (also served as `pods/NAME/log`: `kubectl logs`);
every process is stopped by pid at `stop()`.
Not emulated: restarts (restartPolicy), init/sidecar containers, volumes, probes.
"""

from __future__ import annotations

import datetime
import logging
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.kube_api import KubeApi, KubeClient, KubeClientError, resource_path, secret_value

log = logging.getLogger(__name__)
POD_IP = "127.0.0.1"
NODE_NAME = "process-kubelet"


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodConfigError(Exception):
    """A pod's env refers to a Secret/ConfigMap key that does not exist."""


@dataclass
class RunningPod:
    namespace: str
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    grace_seconds: float
    deleted: threading.Event = field(default_factory=threading.Event)
    forced_reason: str | None = None


class ProcessKubelet:
    """Runs pods as processes; start()/stop() or a context manager."""

    def __init__(
        self,
        api: KubeApi,
        log_dir: Path,
        *,
        cwd: Path | None = None,
        image_pull_failures: str | None = None,
        grace_seconds: float = 5.0,
        environment: Mapping[str, str] | None = None,
        python_path: Sequence[Path] = (),
    ) -> None:
        self.api = api
        self.client: KubeClient = api.client()
        self.log_dir = log_dir
        self.cwd = cwd
        self.image_pull_failures = re.compile(image_pull_failures) if image_pull_failures else None
        self.grace_seconds = grace_seconds
        self.environment = dict(os.environ if environment is None else environment)
        # `python` and `spark-submit` resolve to the test's interpreter; its packages import in the pod
        bin_dir = str(Path(sys.executable).parent)
        self.environment["PATH"] = os.pathsep.join([bin_dir, self.environment.get("PATH", "")]).rstrip(
            os.pathsep
        )
        paths = [str(p) for p in python_path] + [self.environment.get("PYTHONPATH", "")]
        self.environment["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        self.pods: dict[tuple[str, str], RunningPod] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watcher = threading.Thread(target=self._watch, name="kubelet-watch", daemon=True)
        self._watching = threading.Event()

    # ------------------------------------------------------------ lifecycle

    def start(self) -> ProcessKubelet:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._watcher.start()
        if not self._watching.wait(30):
            raise RuntimeError("the process kubelet could not start watching pods; see the log")
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            running = list(self.pods.values())
        for pod in running:
            self._terminate(pod)
        for thread in self._threads:
            thread.join(30)
        # the watch ends when the API server stops (its streams close); do not wait on it here

    def __enter__(self) -> ProcessKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_of(self, namespace: str, name: str) -> str:
        path = self.log_dir / f"{namespace}_{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def oom_kill(self, namespace: str, name: str) -> None:
        """Ends the pod's process as the kernel would on OOM: SIGKILL, reason OOMKilled, exit 137."""
        with self._lock:
            pod = self.pods[(namespace, name)]
        pod.forced_reason = "OOMKilled"
        self._signal(pod, signal.SIGKILL)

    # ------------------------------------------------------------ watching

    def _watch(self) -> None:
        listing = self.client.get("/api/v1/pods")
        for pod in listing["items"]:
            self._consider(pod)
        self._watching.set()
        try:
            for event in self.client.watch(
                "/api/v1/pods", timeout=3600, resourceVersion=listing["metadata"]["resourceVersion"]
            ):
                if self._stopping.is_set():
                    return
                pod = event["object"]
                if event["type"] == "DELETED" or pod["metadata"].get("deletionTimestamp"):
                    self._deleted(pod)
                else:
                    self._consider(pod)
        except OSError as error:  # the API server stopped
            if not self._stopping.is_set():
                log.warning("process kubelet: the pod watch ended: %r", error)

    def _consider(self, pod: dict[str, Any]) -> None:
        if pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            return
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        path = resource_path("v1", "pods", namespace, name)
        try:
            self.client.patch(
                path,
                [
                    {
                        "op": "test",
                        "path": "/metadata/resourceVersion",
                        "value": pod["metadata"]["resourceVersion"],
                    },
                    {"op": "add", "path": "/spec/nodeName", "value": NODE_NAME},
                ],
                kind="json",
            )
        except KubeClientError as error:
            log.info("process kubelet: pod %s/%s not claimed (%s)", namespace, name, error)
            return
        thread = threading.Thread(target=self._run_pod, args=(pod,), name=f"kubelet-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _deleted(self, pod: dict[str, Any]) -> None:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        with self._lock:
            running = self.pods.get(key)
        if running is not None:
            running.deleted.set()
            threading.Thread(target=self._terminate, args=(running,), daemon=True).start()

    # ------------------------------------------------------------ one pod

    def _status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        path = resource_path("v1", "pods", pod["metadata"]["namespace"], pod["metadata"]["name"], "status")
        try:
            self.client.patch(path, {"status": status})
        except KubeClientError as error:
            if error.status != 404:  # a deleted pod has no status to report
                raise

    def _container_status(self, container: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
        return {
            "name": container.get("name", "main"),
            "image": container.get("image", ""),
            "imageID": "",
            "ready": "running" in state,
            "restartCount": 0,
            "started": "running" in state,
            "state": state,
        }

    def _run_pod(self, pod: dict[str, Any]) -> None:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        container = pod["spec"]["containers"][0]
        base = {"hostIP": POD_IP, "startTime": _now()}
        if self.image_pull_failures is not None and self.image_pull_failures.search(
            container.get("image", "")
        ):
            self._status(
                pod,
                {
                    **base,
                    "phase": "Pending",
                    "containerStatuses": [
                        self._container_status(
                            container,
                            {
                                "waiting": {
                                    "reason": "ImagePullBackOff",
                                    "message": f'Back-off pulling image "{container.get("image")}"',
                                }
                            },
                        )
                    ],
                },
            )
            return
        try:
            env = self._env(pod, container)
        except PodConfigError as error:
            self._status(
                pod,
                {
                    **base,
                    "phase": "Pending",
                    "containerStatuses": [
                        self._container_status(
                            container,
                            {"waiting": {"reason": "CreateContainerConfigError", "message": str(error)}},
                        )
                    ],
                },
            )
            return
        argv = [*container.get("command", []), *container.get("args", [])]
        log_path = self.log_dir / f"{namespace}_{name}.log"
        # the container's terminationMessagePath, which a process cannot have at /dev/termination-log
        message_path = self.log_dir / f"{namespace}_{name}.termination-log"
        message_path.write_bytes(b"")
        env.setdefault("WEIR_TERMINATION_LOG", str(message_path))
        self.api.call(lambda: self.api.handler.pod_logs.__setitem__((namespace, name), log_path))
        grace = pod["spec"].get("terminationGracePeriodSeconds")
        with self._lock:
            if self._stopping.is_set():
                return
            with log_path.open("wb") as log_file:
                try:
                    process = subprocess.Popen(
                        argv,
                        env=env,
                        cwd=self.cwd,
                        stdout=log_file,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                except OSError as error:
                    log_file.write(f"process kubelet: cannot start {argv}: {error}\n".encode())
                    self._status(
                        pod,
                        {
                            **base,
                            "phase": "Failed",
                            "containerStatuses": [
                                self._container_status(
                                    container,
                                    {
                                        "terminated": {
                                            "exitCode": 128,
                                            "reason": "StartError",
                                            "message": str(error),
                                        }
                                    },
                                )
                            ],
                        },
                    )
                    return
            running = RunningPod(
                namespace, name, process, log_path, float(grace) if grace is not None else self.grace_seconds
            )
            self.pods[(namespace, name)] = running
        started = _now()
        self._status(
            pod,
            {
                **base,
                "phase": "Running",
                "podIP": POD_IP,
                "podIPs": [{"ip": POD_IP}],
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}],
                "containerStatuses": [self._container_status(container, {"running": {"startedAt": started}})],
            },
        )
        code = process.wait()
        with self._lock:
            self.pods.pop((namespace, name), None)
        if running.deleted.is_set() or self._stopping.is_set():
            return
        exit_code = 128 - code if code < 0 else code  # killed by signal N -> 128+N, as containers report
        reason = running.forced_reason or ("Completed" if exit_code == 0 else "Error")
        message = _termination_message(container, message_path, log_path, exit_code)
        self._status(
            pod,
            {
                **base,
                "phase": "Succeeded" if exit_code == 0 else "Failed",
                "podIP": POD_IP,
                "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": _now()}],
                "containerStatuses": [
                    self._container_status(
                        container,
                        {
                            "terminated": {
                                "exitCode": exit_code,
                                "reason": reason,
                                "startedAt": started,
                                "finishedAt": _now(),
                                **({"message": message} if message else {}),
                            }
                        },
                    )
                ],
            },
        )

    def _env(self, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
        env = dict(self.environment)
        namespace = pod["metadata"]["namespace"]
        for entry in container.get("env", []):
            if "value" in entry:
                env[entry["name"]] = str(entry["value"])
                continue
            source = entry.get("valueFrom") or {}
            if "secretKeyRef" in source or "configMapKeyRef" in source:
                is_secret = "secretKeyRef" in source
                ref = source["secretKeyRef" if is_secret else "configMapKeyRef"]
                plural = "secrets" if is_secret else "configmaps"
                try:
                    obj = self.client.get(resource_path("v1", plural, namespace, ref["name"]))
                    value = (
                        secret_value(obj, ref["key"])
                        if is_secret
                        else (obj.get("data") or {}).get(ref["key"])
                    )
                except KubeClientError as error:
                    if error.status != 404:
                        raise
                    value = None
                if value is None:
                    if ref.get("optional"):
                        continue
                    raise PodConfigError(
                        f'{plural[:-1]} "{ref["name"]}" has no key "{ref["key"]}"; create it'
                    )
                env[entry["name"]] = value
            elif "fieldRef" in source:
                path = source["fieldRef"]["fieldPath"]
                values = {
                    "status.podIP": POD_IP,
                    "status.hostIP": POD_IP,
                    "metadata.name": pod["metadata"]["name"],
                    "metadata.namespace": namespace,
                    "spec.nodeName": NODE_NAME,
                    "metadata.uid": pod["metadata"].get("uid", ""),
                }
                if path not in values:
                    raise PodConfigError(f"fieldRef {path} is not emulated; use one of {sorted(values)}")
                env[entry["name"]] = values[path]
        return env

    # ------------------------------------------------------------ stopping processes

    def _signal(self, pod: RunningPod, signum: int) -> None:
        try:
            os.killpg(pod.process.pid, signum)  # its own session: the group id is its pid
        except ProcessLookupError:
            pass  # already gone

    def _terminate(self, pod: RunningPod) -> None:
        if pod.process.poll() is not None:
            return
        self._signal(pod, signal.SIGTERM)
        try:
            pod.process.wait(pod.grace_seconds)
        except subprocess.TimeoutExpired:
            self._signal(pod, signal.SIGKILL)
            pod.process.wait()


def _termination_message(container: dict[str, Any], message_path: Path, log_path: Path,
                         exit_code: int) -> str:
    """What a kubelet reports as the terminated container's message: the termination message file (up to
    4096 bytes), or with terminationMessagePolicy FallbackToLogsOnError and a failed container whose
    file is empty, the end of its log (up to 80 lines, 2048 bytes)."""
    try:
        message = message_path.read_bytes()[:4096].decode("utf-8", "replace")
    except OSError:
        message = ""
    fallback = container.get("terminationMessagePolicy") == "FallbackToLogsOnError"
    if not message and exit_code != 0 and fallback:
        try:
            tail = log_path.read_bytes()[-2048:]
        except OSError:
            tail = b""
        message = b"\n".join(tail.splitlines()[-80:]).decode("utf-8", "replace")
    return message
