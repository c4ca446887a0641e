"""The real Weir operator for tests: `python -m lakeoperator` as a process against a real API server.

Owns the operator process of one test: started with a throw-away kubeconfig for the control plane
(kube_server.py; the admin's unless the test gives another, e.g. a ServiceAccount token's), watching
the test's namespace, its own liveness and metrics ports on 127.0.0.1, the sparkjobs files of this
checkout as the image's jobs directory (the process kubelet runs pods with this interpreter's
spark-submit), and its log in the test's directory. `stop()` is a SIGTERM (kopf's graceful exit),
`kill()` a SIGKILL (a crashed operator); both by pid. `Cluster` bundles what operator tests need: the
server with the Weir CRDs, the test's namespace, a process kubelet running that namespace's pods in the
test's directory, the operator, and an admin client.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.kube_client import KubeClient, KubeClientError, resource_path
from tests.support.kube_server import ControlPlane
from tests.support.kubelet import ProcessKubelet

ROOT = Path(__file__).resolve().parents[2]
WEIR = "weir.dev/v1alpha1"
PLURALS = {"LakeTable": "laketables", "LakeWriter": "lakewriters", "TableService": "tableservices"}
CRDS = tuple(sorted((ROOT / "crds").glob("weir.dev_*.yaml")))
DELETE_DATA = "weir.dev/delete-data"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until(probe: Any, timeout: float = 60, show: Any = None) -> Any:
    """Poll `probe` until it returns something truthy (returned); fail after `timeout` seconds, with
    `show()` in the message when given. For states no single watch covers (lists, several objects)."""
    deadline = time.monotonic() + timeout
    while not (found := probe()):
        assert time.monotonic() < deadline, f"timed out after {timeout}s: {show() if show else ''}"
        time.sleep(0.05)
    return found


def weir_path(kind: str, name: str | None = None, namespace: str = "default", sub: str | None = None) -> str:
    return resource_path(WEIR, PLURALS[kind], namespace, name, sub)


def pod_environment() -> dict[str, str]:
    """What the image's environment gives a driver: this interpreter for Spark's Python workers, and Spark's
    connectors (Kafka, Avro, s3a; the image has them in pyspark's jars) on spark-submit's classpath."""
    from sparkjobs.jars import classpath

    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    connectors = classpath()
    if connectors:
        before = env.get("SPARK_DIST_CLASSPATH")
        env["SPARK_DIST_CLASSPATH"] = os.pathsep.join([before, connectors] if before else [connectors])
    return env


class OperatorProcess:
    """`python -m lakeoperator` against `server`, watching `namespaces` (none: every namespace), as the
    admin or as whoever `kubeconfig` names (see the module docstring)."""

    def __init__(self, server: ControlPlane, work: Path, *, namespaces: Sequence[str],
                 kubeconfig: Path | None = None, workers: int = 4, extra: Sequence[str] = (),
                 env: Mapping[str, str] | None = None) -> None:
        self.server = server
        self.work = work
        self.namespaces = tuple(namespaces)
        self.kubeconfig = kubeconfig or server.write_kubeconfig(
            work / "operator-kubeconfig", namespace=self.namespaces[0] if self.namespaces else "default")
        self.workers = workers
        self.extra = tuple(extra)
        self.env = dict(env or {})
        self.liveness_port = free_port()
        self.metrics_port = free_port()
        self.log_path = work / "operator.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def command(self) -> list[str]:
        jobs = ROOT / "sparkjobs"
        args = [sys.executable, "-m", "lakeoperator", "--kubeconfig", str(self.kubeconfig),
                "--image", "weir-test:local", "--jobs-dir", str(jobs), "--api-server", self.server.url,
                "--workers", str(self.workers), "--liveness-port", str(self.liveness_port),
                "--metrics-port", str(self.metrics_port), "--metrics-address", "127.0.0.1", "--verbose"]
        for namespace in self.namespaces:
            args += ["--namespace", namespace]
        return [*args, *self.extra]

    def start(self, *, timeout: float = 60) -> OperatorProcess:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator")]),
               "KUBECONFIG": str(self.kubeconfig), **self.env}
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== operator start {self.starts} =====\n".encode())
            log.flush()
            self.process = subprocess.Popen(self.command(), cwd=self.work, env=env, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the operator exited with {self.process.returncode}:\n"
                                   f"{self.log()[-4000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the operator did not become live in {timeout}s:\n{self.log()[-4000:]}")

    def stop(self, timeout: float = 30) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return self.kill()

    def kill(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        return self.process.wait(30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text: str = r.read().decode()
            return text


@dataclass
class Cluster:
    """A real API server with Weir's CRDs, the test's namespace, a process kubelet for it and the
    operator watching it, for one test. Namespaced calls default to the test's namespace."""

    server: ControlPlane
    namespace: str
    client: KubeClient
    kubelet: ProcessKubelet
    operator: OperatorProcess
    work: Path

    def path(self, kind: str, name: str | None = None, sub: str | None = None) -> str:
        return weir_path(kind, name, self.namespace, sub)

    def apply(self, body: dict[str, Any]) -> dict[str, Any]:
        namespace = body["metadata"].setdefault("namespace", self.namespace)
        created: dict[str, Any] = self.client.create(weir_path(body["kind"], namespace=namespace), body)
        return created

    def get(self, kind: str, name: str) -> dict[str, Any]:
        got: dict[str, Any] = self.client.get(self.path(kind, name))
        return got

    def patch(self, kind: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        done: dict[str, Any] = self.client.patch(self.path(kind, name), patch)
        return done

    def delete(self, kind: str, name: str) -> None:
        self.client.delete(self.path(kind, name))

    def wait_status(self, kind: str, name: str, predicate: Any, *, timeout: float = 120) -> dict[str, Any]:
        try:
            return self.client.wait_for(self.path(kind, name),
                                        lambda o: bool(predicate(o.get("status") or {})), timeout=timeout)
        except Exception as exc:
            status = self.get(kind, name).get("status")
            raise AssertionError(f"{kind} {name}: {exc}\nstatus: {status}"
                                 f"\noperator log:\n{self.operator.log()[-6000:]}") from exc

    def pods(self, selector: str | None = None) -> list[dict[str, Any]]:
        params = {"labelSelector": selector} if selector else {}
        items: list[dict[str, Any]] = self.client.get(resource_path("v1", "pods", self.namespace),
                                                      **params)["items"]
        return items

    def kill_driver(self, name: str) -> None:
        """SIGKILL a running driver pod's process (a crashed JVM, a node that killed it)."""
        running = self.kubelet.pods[(self.namespace, name)]
        os.killpg(running.process.pid, signal.SIGKILL)

    def events(self, name: str) -> list[dict[str, Any]]:
        return events_of(self.client, self.namespace, name)

    def event_reasons(self, name: str, until: Callable[[list[str]], bool], *,
                      timeout: float = 30) -> list[str]:
        """The reasons of the Events about `name` once `until` holds for them (a pass posts its Events
        after it writes the status, so one lands a moment after the status change it tells of)."""
        deadline = time.monotonic() + timeout
        while True:
            reasons = [e["reason"] for e in self.events(name)]
            if until(reasons):
                return reasons
            assert time.monotonic() < deadline, f"events about {name} after {timeout} s: {reasons}"
            time.sleep(0.2)


def events_of(client: KubeClient, namespace: str, name: str) -> list[dict[str, Any]]:
    """The Events about the object `name` in `namespace`, oldest first."""
    items = client.get(resource_path("v1", "events", namespace))["items"]
    return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]


def release_tables(client: KubeClient, namespace: str) -> None:
    """Takes the operator's finalizer off the namespace's LakeTables (the operator is stopped), so that
    deleting the namespace is not held up by tables whose policy is to delete their data."""
    for body in client.get(weir_path("LakeTable", namespace=namespace))["items"]:
        finalizers = body["metadata"].get("finalizers") or []
        if DELETE_DATA in finalizers:
            remaining = [f for f in finalizers if f != DELETE_DATA]
            try:
                client.patch(weir_path("LakeTable", body["metadata"]["name"], namespace),
                             {"metadata": {"finalizers": remaining or None,
                                           "resourceVersion": body["metadata"]["resourceVersion"]}})
            except KubeClientError as error:
                if error.status not in {404, 409}:  # gone, or changed: the namespace's deletion retries
                    raise


def start_cluster(server: ControlPlane, namespace: str, work: Path, *, image_pull_failures: str | None = None,
                  **operator_options: Any) -> Iterator[Cluster]:
    server.apply_crds(*CRDS)
    client = server.client()
    with ProcessKubelet(server, work / "pod-logs", cwd=work, environment=pod_environment(),
                        python_path=[ROOT, ROOT / "operator"], namespace=namespace,
                        image_pull_failures=image_pull_failures) as kubelet:
        operator = OperatorProcess(server, work, namespaces=(namespace,), **operator_options).start()
        try:
            yield Cluster(server, namespace, client, kubelet, operator, work)
        finally:
            operator.stop()
            release_tables(client, namespace)
