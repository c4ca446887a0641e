"""A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager.

Owns one throw-away cluster: the servers come from one binary built from the pinned Go modules of
tests/support/controlplane (`make controlplane`: `.tools/controlplane/<version>/controlplane`, dispatching
on its first argument), started on free 127.0.0.1 ports with their data, certificates (kube_certs.py) and
logs in a temp dir. The API server runs with RBAC (and the Node authorizer), client-certificate
authentication, and service-account tokens (issuer + signing key: the TokenRequest API works); the
controller-manager runs what the tests rely on (garbage collection through ownerReferences, namespace
deletion, the `default` ServiceAccount of each namespace, the root CA ConfigMap, ClusterRole aggregation)
with one service-account identity per controller, as clusters do. No scheduler and no kubelet: the
process kubelet (kubelet.py) is both. Every process runs in its own process group and is stopped by pid
(SIGTERM, then SIGKILL), also when starting fails.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.kube_certs import CertificateAuthority, KeyPair, signing_key
from tests.support.kube_client import KubeClient, KubeClientError, resource_path
from tests.support.zookeeper import free_port

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "support" / "controlplane"
HOST = "127.0.0.1"
ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_RANGE = "10.0.0.0/24"
# the controllers the tests rely on (every other one stays off: no scheduler, nodes or volumes here)
CONTROLLERS = (
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
)


def kubernetes_version(go_mod: Path = SOURCE / "go.mod") -> str:
    """The k8s.io/kubernetes version go.mod pins (the Makefile reads it the same way)."""
    match = re.search(r"^\s*k8s\.io/kubernetes\s+(v\S+)", go_mod.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{go_mod} requires no k8s.io/kubernetes version")
    return match.group(1)


def binary_path() -> Path:
    return ROOT / ".tools" / "controlplane" / kubernetes_version() / "controlplane"


def controlplane_missing_reason() -> str | None:
    """Why the control plane binary cannot be used (None: built and newer than its sources)."""
    binary = binary_path()
    sources = [SOURCE / "go.mod", SOURCE / "go.sum", *SOURCE.glob("*.go")]
    if binary.exists() and binary.stat().st_mtime >= max(s.stat().st_mtime for s in sources):
        return None
    if shutil.which("go") is None:
        return ("Go is not installed: the control plane is built from the Go modules pinned in "
                "tests/support/controlplane; install Go (its go.mod names the version), "
                "then run `make controlplane`")
    if not binary.exists():
        return (f"{binary.relative_to(ROOT)} is not built: run `make controlplane` "
                "(cold Go caches: 15-25 min; warm: 15-35 s)")
    return f"{binary.relative_to(ROOT)} is older than tests/support/controlplane: run `make controlplane`"


@dataclass
class Component:
    """One server process: its own process group, its output in `log_path`."""

    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT, start_new_session=True)

    def check_alive(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {self.process.returncode}; the end of "
                               f"{self.log_path}:\n{self.log_tail()}")

    def log_tail(self, size: int = 4000) -> str:
        return self.log_path.read_bytes()[-size:].decode(errors="replace") if self.log_path.exists() else ""

    def stop(self, grace: float = 10) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        for signum in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, signum)  # its own session: the group id is its pid
            except ProcessLookupError:
                return
            try:
                self.process.wait(grace)
                return
            except subprocess.TimeoutExpired:
                continue


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager in `workdir`; a context manager. `startup_seconds`
    is how long start() took, until the API server was ready and the `default` ServiceAccount existed."""

    def __init__(self, workdir: Path, binary: Path | None = None, *,
                 controllers: Sequence[str] = CONTROLLERS, extra_apiserver_args: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self.binary = binary or binary_path()
        self.controllers = tuple(controllers)
        self.extra_apiserver_args = tuple(extra_apiserver_args)
        self.port = free_port()
        self.etcd_port, self.etcd_peer_port = free_port(), free_port()
        self.url = f"https://{HOST}:{self.port}"
        pki = workdir / "pki"
        self.ca = CertificateAuthority(pki)
        self.serving = self.ca.issue("apiserver", "kube-apiserver", server=True, hosts=(
            HOST, "localhost", "10.0.0.1", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local"))
        self.admin = self.ca.issue("admin", "weir-test-admin", organizations=("system:masters",), client=True)
        self.kubelet_client = self.ca.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client",
                                            client=True)
        controller_manager = self.ca.issue("controller-manager", "system:kube-controller-manager",
                                           client=True)
        self.service_account_key = signing_key(pki)
        self.kubeconfig = self.write_kubeconfig(workdir / "admin.kubeconfig")
        cm_kubeconfig = self.write_kubeconfig(workdir / "controller-manager.kubeconfig",
                                              user=controller_manager)
        self.components = [
            Component("etcd", self._etcd_argv(), workdir / "etcd.log"),
            Component("kube-apiserver", self._apiserver_argv(), workdir / "kube-apiserver.log"),
            Component("kube-controller-manager", self._controller_manager_argv(cm_kubeconfig),
                      workdir / "kube-controller-manager.log"),
        ]
        self.startup_seconds = 0.0

    # ------------------------------------------------------------ command lines

    def _etcd_argv(self) -> list[str]:
        client, peer = f"http://{HOST}:{self.etcd_port}", f"http://{HOST}:{self.etcd_peer_port}"
        return [str(self.binary), "etcd", "--name", "weir-test", "--data-dir", str(self.workdir / "etcd"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"weir-test={peer}",
                "--unsafe-no-fsync",  # throw-away data: durability costs seconds on a busy disk
                "--log-level", "warn"]

    def _apiserver_argv(self) -> list[str]:
        pki = self.ca.directory
        return [str(self.binary), "kube-apiserver",
                f"--etcd-servers=http://{HOST}:{self.etcd_port}",
                f"--bind-address={HOST}", f"--advertise-address={HOST}", f"--secure-port={self.port}",
                f"--cert-dir={self.workdir / 'apiserver'}",
                f"--tls-cert-file={self.serving.cert}", f"--tls-private-key-file={self.serving.key}",
                f"--client-ca-file={self.ca.cert}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-issuer={ISSUER}",
                f"--service-account-key-file={self.service_account_key.cert}",
                f"--service-account-signing-key-file={self.service_account_key.key}",
                f"--service-cluster-ip-range={SERVICE_RANGE}",
                # the `kubernetes` Service's endpoints cannot be a loopback address; nothing here uses it
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                # pods/log and exec reach the process kubelet at its node's InternalIP
                f"--kubelet-client-certificate={self.kubelet_client.cert}",
                f"--kubelet-client-key={self.kubelet_client.key}",
                f"--kubelet-certificate-authority={pki / 'ca.crt'}",
                "--kubelet-preferred-address-types=InternalIP",
                "--profiling=false",
                *self.extra_apiserver_args]

    def _controller_manager_argv(self, kubeconfig: Path) -> list[str]:
        return [str(self.binary), "kube-controller-manager", f"--kubeconfig={kubeconfig}",
                "--secure-port=0", "--leader-elect=false", f"--controllers={','.join(self.controllers)}",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={self.service_account_key.key}",
                f"--root-ca-file={self.ca.cert}",
                # a deleted namespace's objects go within a second, not after the default 5 s resync
                "--namespace-sync-period=1s"]

    # ------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 120) -> ControlPlane:
        began = time.monotonic()
        deadline = began + timeout
        try:
            etcd, apiserver, controller_manager = self.components
            etcd.start()
            apiserver.start()  # it retries etcd until that answers
            self._wait(apiserver, deadline, self._apiserver_ready, "the API server's /readyz")
            controller_manager.start()
            self._wait(controller_manager, deadline, self._default_service_account,
                       "the default ServiceAccount (made by the controller-manager)")
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait(self, component: Component, deadline: float, ready: object, what: str) -> None:
        assert callable(ready)
        while not ready():
            for each in self.components:
                each.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}; the end of {component.log_path}:\n"
                                   f"{component.log_tail()}")
            time.sleep(0.1)

    def _apiserver_ready(self) -> bool:
        request = urllib.request.Request(f"{self.url}/readyz")
        try:
            with urllib.request.urlopen(request, timeout=5, context=self.ssl_context()) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _default_service_account(self) -> bool:
        try:
            self.client().get(resource_path("v1", "serviceaccounts", "default", "default"))
            return True
        except KubeClientError as error:
            if error.status == 404:
                return False
            raise

    def stop(self) -> None:
        for component in reversed(self.components):  # the controller-manager first, etcd last
            component.stop()

    def restart_apiserver(self, down_seconds: float = 0.0, timeout: float = 60) -> None:
        """Stops the API server (SIGTERM: its open watches end), waits `down_seconds`, starts it again
        on the same port over the same etcd, and waits until it is ready."""
        apiserver = self.components[1]
        apiserver.stop()
        time.sleep(down_seconds)
        apiserver.start()
        self._wait(apiserver, time.monotonic() + timeout, self._apiserver_ready, "the restarted API server")

    def compact_etcd(self) -> int:
        """Compacts etcd up to its current revision: a watch from an older resourceVersion that the API
        server serves from etcd (no watch cache) gets 410 Gone. Returns the revision."""
        def post(path: str, body: dict[str, object]) -> dict[str, Any]:
            request = urllib.request.Request(f"http://{HOST}:{self.etcd_port}/v3/kv/{path}",
                                             data=json.dumps(body).encode(), method="POST")
            with urllib.request.urlopen(request, timeout=10) as response:
                answer: dict[str, Any] = json.loads(response.read())
                return answer

        revision = int(post("range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
        post("compaction", {"revision": str(revision), "physical": True})
        return revision

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def logs(self) -> str:
        """The end of every component's log (for a failing test's message)."""
        return "\n".join(f"--- {c.name} ({c.log_path})\n{c.log_tail(2000)}" for c in self.components)

    # ------------------------------------------------------------ clients

    def ssl_context(self, user: KeyPair | None = None) -> ssl.SSLContext:
        """Trusts the cluster's CA; presents `user`'s client certificate (the admin's by default)."""
        context = ssl.create_default_context(cafile=str(self.ca.cert))
        client = user or self.admin
        context.load_cert_chain(str(client.cert), str(client.key))
        return context

    def client(self, token: str | None = None) -> KubeClient:
        """The admin's client (system:masters), or one authenticated by a bearer `token` only."""
        if token is not None:
            return KubeClient(self.url, ssl_context=ssl.create_default_context(cafile=str(self.ca.cert)),
                              token=token)
        return KubeClient(self.url, ssl_context=self.ssl_context())

    def create_namespace(self, stem: str) -> str:
        """A new namespace (`<stem>-<random>`) with its `default` ServiceAccount (pods need it)."""
        name = f"{re.sub(r'[^a-z0-9]+', '-', stem.lower()).strip('-')[:40].strip('-')}-{uuid.uuid4().hex[:6]}"
        client = self.client()
        client.create(resource_path("v1", "namespaces"), {"metadata": {"name": name}})
        client.wait_for(resource_path("v1", "serviceaccounts", name, "default"), bool)
        return name

    @contextlib.contextmanager
    def namespace(self, stem: str) -> Iterator[str]:
        """A new namespace (create_namespace), deleted afterwards, its pods at once (a stopped kubelet
        finishes none)."""
        name = self.create_namespace(stem)
        try:
            yield name
        finally:
            client = self.client()
            client.request("DELETE", resource_path("v1", "pods", name), {"gracePeriodSeconds": 0})
            client.delete(resource_path("v1", "namespaces", name=name))

    def apply_crds(self, *paths: Path) -> list[str]:
        """Applies (server-side) every CustomResourceDefinition in the YAML files and waits until each is
        Established; returns their names. Applying the same files again changes nothing."""
        client, names = self.client(), []
        crds = resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions")
        for path in paths:
            for document in yaml.safe_load_all(path.read_text()):
                if document and document.get("kind") == "CustomResourceDefinition":
                    name = document["metadata"]["name"]
                    client.patch(f"{crds}/{name}", document, kind="apply", fieldManager="weir-tests",
                                 force="true")
                    names.append(name)
        for name in names:
            client.wait_for(f"{crds}/{name}", lambda crd: any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (crd.get("status") or {}).get("conditions") or []))
        return names

    def kubelet_tls(self, node_name: str) -> ssl.SSLContext:
        """A kubelet endpoint's TLS: a serving certificate for 127.0.0.1 from the cluster's CA, and only
        clients with a certificate from it (the API server's kubelet client certificate)."""
        serving = self.ca.issue(f"kubelet-{node_name}", f"system:node:{node_name}",
                                organizations=("system:nodes",), hosts=(HOST, "localhost"), server=True)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(serving.cert), str(serving.key))
        context.load_verify_locations(str(self.ca.cert))
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    def token(self, namespace: str, service_account: str, seconds: int = 3600) -> str:
        """A ServiceAccount's token from the TokenRequest API (bound to the SA, expiring)."""
        path = resource_path("v1", "serviceaccounts", namespace, service_account, "token")
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}}
        token: str = self.client().create(path, body)["status"]["token"]
        return token

    def namespace_admin_token(self, namespace: str, name: str = "weir-test-admin") -> str:
        """A token of ServiceAccount `name` in `namespace`, bound to the `admin` ClusterRole there: for
        Java clients (Spark's fabric8), which read no elliptic-curve client key without BouncyCastle."""
        client = self.client()
        client.create(resource_path("v1", "serviceaccounts", namespace), {"metadata": {"name": name}})
        client.create(resource_path("rbac.authorization.k8s.io/v1", "rolebindings", namespace), {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]})
        return self.token(namespace, name)

    def write_kubeconfig(self, path: Path, namespace: str = "default", *, user: KeyPair | None = None,
                         token: str | None = None) -> Path:
        """A self-contained kubeconfig (certificates inline) for the admin, a client certificate `user`
        or a bearer `token`."""
        def inline(file: Path) -> str:
            return base64.b64encode(file.read_bytes()).decode()

        if token is not None:
            credentials = {"token": token}
        else:
            client = user or self.admin
            credentials = {"client-certificate-data": inline(client.cert),
                           "client-key-data": inline(client.key)}
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "weir-test",
            "clusters": [{"name": "weir-test", "cluster": {
                "server": self.url, "certificate-authority-data": inline(self.ca.cert)}}],
            "users": [{"name": "weir-test", "user": credentials}],
            "contexts": [{"name": "weir-test",
                          "context": {"cluster": "weir-test", "user": "weir-test", "namespace": namespace}}],
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path
