"""A process kubelet for tests: runs Pods as local processes, against the real API server (kube_server.py).

Owns the pod lifecycle on one Node, as a kubelet and the scheduler would: it registers the Node (Ready, on
127.0.0.1), watches Pods (of one namespace, or all), binds each unassigned one to its Node (the
`pods/binding` subresource), runs its first container's command+args with its env (literals,
secretKeyRef and configMapKeyRef read from the API, fieldRef status.podIP/metadata.*) on top of the test
process's environment, and reports Pending -> Running -> Succeeded/Failed through the `/status`
subresource (containerStatuses with startedAt/finishedAt, exit code and termination message; bodies in
pod_status.py). Deleting a Pod stops its process (SIGTERM, SIGKILL after the grace period), then the
kubelet removes the Pod for good (gracePeriodSeconds 0), as a real API server waits for. The watch
resumes from its last version, and lists again after a 410 Gone or a restarted server.
Tests can make images never pull (`image_pull_failures`: ImagePullBackOff) and end a pod as OOMKilled.
Each process logs to `<log_dir>/<namespace>_<pod>.log`, which `kubectl logs` reads (the API
server asks this kubelet's log endpoint, kubelet_logs.py); every process is stopped by
pid at `stop()`.
Not emulated: restarts (restartPolicy), init/sidecar containers, volumes, probes, node heartbeats (no
node-lifecycle controller runs).
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support import pod_status
from tests.support.kube_client import KubeClient, KubeClientError, KubeServer, resource_path, secret_value
from tests.support.kubelet_logs import PodLogServer
from tests.support.pod_status import POD_IP, now

log = logging.getLogger(__name__)
NODE_NAME = "process-kubelet"
WATCH_SECONDS = 300  # the server ends each watch after this; the kubelet resumes from its last version

PodKey = tuple[str, str]  # namespace, name


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
    """Runs pods as processes; start()/stop() or a context manager. With `namespace`, only that
    namespace's pods (several tests can share one API server, each with its own kubelet)."""

    def __init__(
        self,
        api: KubeServer,
        log_dir: Path,
        *,
        cwd: Path | None = None,
        image_pull_failures: str | None = None,
        grace_seconds: float = 5.0,
        environment: Mapping[str, str] | None = None,
        python_path: Sequence[Path] = (),
        namespace: str | None = None,
        node_name: str = NODE_NAME,
        watch_seconds: int = WATCH_SECONDS,
    ) -> None:
        self.api = api
        self.client: KubeClient = api.client()
        self.log_dir = log_dir
        self.cwd = cwd
        self.image_pull_failures = re.compile(image_pull_failures) if image_pull_failures else None
        self.grace_seconds = grace_seconds
        self.node_name = node_name
        self.watch_seconds = watch_seconds
        self.pods_path = resource_path("v1", "pods", namespace)
        self.environment = dict(os.environ if environment is None else environment)
        # `python` and `spark-submit` resolve to the test's interpreter; its packages import in the pod
        bin_dir = str(Path(sys.executable).parent)
        self.environment["PATH"] = os.pathsep.join([bin_dir, self.environment.get("PATH", "")]).rstrip(
            os.pathsep
        )
        paths = [str(p) for p in python_path] + [self.environment.get("PYTHONPATH", "")]
        self.environment["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        self.pods: dict[PodKey, RunningPod] = {}
        self._doomed: set[str] = set()  # uids of pods deleted before or while their process starts
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watcher = threading.Thread(target=self._watch, name="kubelet-watch", daemon=True)
        self._watching = threading.Event()
        self._watch_connection: http.client.HTTPConnection | None = None
        self._log_server = PodLogServer(api.kubelet_tls(node_name), self.log_path, self._is_running)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> ProcessKubelet:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_server.start()
        self._register_node()
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
        self._log_server.stop()
        self._end_watch()
        if self._watcher.is_alive():
            self._watcher.join(10)

    @property
    def watching(self) -> bool:
        """Whether its pod watch still runs (it ends with stop())."""
        return self._watcher.is_alive()

    def __enter__(self) -> ProcessKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_path(self, namespace: str, name: str) -> Path:
        return self.log_dir / f"{namespace}_{name}.log"

    def log_of(self, namespace: str, name: str) -> str:
        path = self.log_path(namespace, name)
        return path.read_text(errors="replace") if path.exists() else ""

    def _is_running(self, namespace: str, name: str) -> bool:
        with self._lock:
            return (namespace, name) in self.pods

    def oom_kill(self, namespace: str, name: str) -> None:
        """Ends the pod's process as the kernel would on OOM: SIGKILL, reason OOMKilled, exit 137."""
        with self._lock:
            pod = self.pods[(namespace, name)]
        pod.forced_reason = "OOMKilled"
        self._signal(pod, signal.SIGKILL)

    def _register_node(self) -> None:
        """Creates this kubelet's Node (or takes over an earlier kubelet's), Ready, without the not-ready
        taint admission puts on new nodes (no node-lifecycle controller would lift it)."""
        path = resource_path("v1", "nodes", name=self.node_name)
        body = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": self.node_name, "labels": {"kubernetes.io/hostname": self.node_name,
                                                                "kubernetes.io/os": "linux"}}}
        try:
            self.client.create(resource_path("v1", "nodes"), body)
        except KubeClientError as error:
            if error.status != 409:
                raise
        self.client.patch(path, {"spec": {"taints": None}})
        self.client.patch(f"{path}/status", {"status": pod_status.node_status(self.node_name,
                                                                             self._log_server.port)},
                          kind="strategic")

    # ------------------------------------------------------------ watching

    def _watch(self) -> None:
        version: str | None = None
        while not self._stopping.is_set():
            try:
                if version is None:
                    listing = self.client.get(self.pods_path)
                    self._relisted(listing["items"])
                    version = listing["metadata"]["resourceVersion"]
                    self._watching.set()
                for event in self.client.watch(self.pods_path, timeout=self.watch_seconds + 30,
                                               opened=self._watch_opened, resourceVersion=str(version),
                                               allowWatchBookmarks="true",
                                               timeoutSeconds=str(self.watch_seconds)):
                    if self._stopping.is_set():
                        return
                    if event["type"] == "ERROR":  # 410 Gone: the version is compacted away; list again
                        version = None
                        break
                    version = event["object"]["metadata"]["resourceVersion"]
                    if event["type"] != "BOOKMARK":
                        self._event(event["type"], event["object"])
            except (OSError, KubeClientError) as error:  # a stopped or restarting server
                if self._stopping.is_set():
                    return
                log.warning("process kubelet: the pod watch ended (%r); resuming", error)
                if isinstance(error, KubeClientError) and error.status == 410:
                    version = None
                self._stopping.wait(0.5)

    def _watch_opened(self, connection: http.client.HTTPConnection) -> None:
        self._watch_connection = connection
        if self._stopping.is_set():  # stop() came first: end this watch too
            self._end_watch()

    def _end_watch(self) -> None:
        """Ends the open watch at once (a stopped kubelet holds no stream on a shared server)."""
        connection = self._watch_connection
        if connection is not None and connection.sock is not None:
            with contextlib.suppress(OSError):
                connection.sock.shutdown(socket.SHUT_RDWR)

    def _relisted(self, pods: list[dict[str, Any]]) -> None:
        listed = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods}
        with self._lock:
            gone = [pod for key, pod in self.pods.items() if key not in listed]
        for running in gone:  # deleted while the watch was down
            running.deleted.set()
            threading.Thread(target=self._terminate, args=(running,), daemon=True).start()
        for pod in pods:
            self._event("ADDED", pod)

    def _event(self, kind: str, pod: dict[str, Any]) -> None:
        if kind == "DELETED" or pod["metadata"].get("deletionTimestamp"):
            self._deleted(pod, gone=kind == "DELETED")
        else:
            self._consider(pod)

    def _consider(self, pod: dict[str, Any]) -> None:
        if pod["spec"].get("nodeName") or pod.get("status", {}).get("phase") in {"Succeeded", "Failed"}:
            return
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name}}
        try:
            self.client.create(resource_path("v1", "pods", namespace, name, "binding"), binding)
        except KubeClientError as error:
            log.info("process kubelet: pod %s/%s not bound (%s)", namespace, name, error)
            return
        thread = threading.Thread(target=self._run_pod, args=(pod,), name=f"kubelet-{name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _deleted(self, pod: dict[str, Any], *, gone: bool) -> None:
        """A pod being deleted (or gone): stop its process; a pod on this node is then removed for good."""
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        ours = pod["spec"].get("nodeName") == self.node_name
        with self._lock:
            running = self.pods.get(key)
            if ours:
                self._doomed.add(pod["metadata"]["uid"])
        if running is not None:
            running.deleted.set()
        if gone or not ours:
            if running is not None:
                threading.Thread(target=self._terminate, args=(running,), daemon=True).start()
            return

        def finish() -> None:
            if running is not None:
                self._terminate(running)
            self._remove(pod)

        threading.Thread(target=finish, name=f"kubelet-delete-{key[1]}", daemon=True).start()

    def _remove(self, pod: dict[str, Any]) -> None:
        """What a kubelet does once a deleted pod's containers are gone: delete it with no grace period."""
        path = resource_path("v1", "pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        try:
            self.client.delete(path, gracePeriodSeconds=0, preconditions={"uid": pod["metadata"]["uid"]})
        except KubeClientError as error:
            if error.status not in {404, 409}:  # gone already, or a new pod of that name
                raise

    # ------------------------------------------------------------ one pod

    def _status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        path = resource_path("v1", "pods", pod["metadata"]["namespace"], pod["metadata"]["name"], "status")
        try:
            self.client.patch(path, {"status": status}, kind="strategic")
        except KubeClientError as error:
            if error.status != 404:  # a deleted pod has no status to report
                raise

    def _run_pod(self, pod: dict[str, Any]) -> None:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        container = pod["spec"]["containers"][0]
        base = {"hostIP": POD_IP, "hostIPs": [{"ip": POD_IP}], "startTime": now()}
        image = container.get("image", "")
        if self.image_pull_failures is not None and self.image_pull_failures.search(image):
            self._status(pod, pod_status.waiting(base, container, "ImagePullBackOff",
                                                 f'Back-off pulling image "{image}"'))
            return
        try:
            env = self._env(pod, container)
        except PodConfigError as error:
            self._status(pod, pod_status.waiting(base, container, "CreateContainerConfigError", str(error)))
            return
        argv = [*container.get("command", []), *container.get("args", [])]
        log_path = self.log_path(namespace, name)
        # the container's terminationMessagePath, which a process cannot have at /dev/termination-log
        message_path = self.log_dir / f"{namespace}_{name}.termination-log"
        message_path.write_bytes(b"")
        env.setdefault("WEIR_TERMINATION_LOG", str(message_path))
        grace = pod["spec"].get("terminationGracePeriodSeconds")
        with self._lock:
            if self._stopping.is_set() or pod["metadata"]["uid"] in self._doomed:
                return
            with log_path.open("wb") as log_file:
                try:
                    process = subprocess.Popen(argv, env=env, cwd=self.cwd, stdout=log_file,
                                               stderr=subprocess.STDOUT, start_new_session=True)
                except OSError as error:
                    log_file.write(f"process kubelet: cannot start {argv}: {error}\n".encode())
                    self._status(pod, pod_status.terminated(base, container, exit_code=128,
                                                            reason="StartError", message=str(error),
                                                            with_ip=False))
                    return
            running = RunningPod(
                namespace, name, process, log_path, float(grace) if grace is not None else self.grace_seconds
            )
            self.pods[(namespace, name)] = running
        started = now()
        self._status(pod, pod_status.running(base, container, started))
        code = process.wait()
        with self._lock:
            self.pods.pop((namespace, name), None)
        if running.deleted.is_set() or self._stopping.is_set():
            return
        exit_code = pod_status.exit_code_of(code)
        reason = running.forced_reason or ("Completed" if exit_code == 0 else "Error")
        message = pod_status.termination_message(container, _read(message_path), _read(log_path, 2048),
                                                 exit_code)
        self._status(pod, pod_status.terminated(base, container, exit_code=exit_code, reason=reason,
                                                started=started, message=message))

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
                    "spec.nodeName": self.node_name,
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


def _read(path: Path, tail: int | None = None) -> bytes:
    """A file's bytes (its last `tail` bytes), or none if it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError:
        return b""
    return data if tail is None else data[-tail:]
