"""The one module that talks to the Kubernetes API: Weir resources, their status, driver pods, Events.

Everything else in the operator works on plain dicts (the bodies the API serves) and calls this module
to read or write them; kopf only watches and delivers. `Kube` is the cluster's `store.Store` (the
observe step and the supervisor's sink read and write through that protocol) and, wrapped by
launch/kubernetes.py, its pods' launcher. Built on the official `kubernetes` client
(in-cluster service account or a kubeconfig, the same sources kopf logs in with), with raw JSON bodies
(`_preload_content=False`): no model classes, so a read costs one round trip and one `json.loads`.

Owns the API's error semantics the reconcile core relies on: a get of a missing object is None, a
create of an existing pod is success (the name is the submission: a re-run never makes a second
one), a delete of a missing pod is success, and a status write based on a stale read fails with
`Conflict` (the caller reads again and re-plans). Must not decide anything.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

GROUP, VERSION = "weir.dev", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURALS = {"LakeTable": "laketables", "LakeWriter": "lakewriters", "TableService": "tableservices"}
COMPONENT = "weir-operator"
APPLIED = "appliedSpec"   # LakeWriter status field: the spec the current submission runs, as JSON text
log = logging.getLogger(__name__)


class Conflict(Exception):
    """A write based on a stale read (HTTP 409): read the object again and re-plan."""


class KubeError(Exception):
    """The API server refused a request, or could not be reached."""


def connect(kubeconfig: str | None = None, context: str | None = None) -> k8s.ApiClient:
    """An API client: the pod's service account when running in a cluster (and no kubeconfig is given),
    else the kubeconfig (`--kubeconfig`, $KUBECONFIG or ~/.kube/config)."""
    configuration = k8s.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=configuration)
    else:
        try:
            k8s_config.load_kube_config(config_file=kubeconfig, context=context,
                                        client_configuration=configuration)
        except (k8s_config.ConfigException, OSError) as exc:
            raise KubeError(f"cannot read the kubeconfig ({exc}); pass --kubeconfig, set KUBECONFIG, "
                            "or run the operator in the cluster with a service account") from None
    configuration.retries = 2
    return k8s.ApiClient(configuration)


class Kube:
    """Typed-as-dicts access to the objects the operator reads and writes."""

    holds_secrets = True   # store.Store: the Secrets a LakeTable names are read from the API
    inherits_environment = False   # store.Store: drivers get only what their pod spec gives them

    def __init__(self, api_client: k8s.ApiClient, *, timeout_s: float = 15.0) -> None:
        self.api_client = api_client
        self.core = k8s.CoreV1Api(api_client)
        self.custom = k8s.CustomObjectsApi(api_client)
        self.coordination = k8s.CoordinationV1Api(api_client)
        self.timeout_s = timeout_s

    def _call(self, fn: Any, *args: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        try:
            response = fn(*args, _preload_content=False, _request_timeout=timeout_s or self.timeout_s,
                          **kwargs)
        except ApiException as exc:
            if exc.status == 409:
                raise Conflict(_message(exc)) from None
            raise
        except (OSError, HTTPError) as exc:   # refused, reset, timed out, retries exhausted
            raise KubeError(f"the API server could not be reached: {exc}") from None
        return json.loads(response.data) if response.data else None

    # -- Weir resources ------------------------------------------------------------------------

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            body: dict[str, Any] = self._call(self.custom.get_namespaced_custom_object, GROUP, VERSION,
                                              namespace, PLURALS[kind], name)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeError(f"get {kind} {namespace}/{name}: {_message(exc)}") from None
        return body

    def list_all(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        try:
            listing = self._call(self.custom.list_namespaced_custom_object, GROUP, VERSION, namespace,
                                 PLURALS[kind])
        except ApiException as exc:
            raise KubeError(f"list {kind} in {namespace}: {_message(exc)}") from None
        items: list[dict[str, Any]] = listing.get("items") or []
        return items

    def bodies(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        return self.list_all(kind, namespace)

    def names(self, kind: str, namespace: str) -> list[str]:
        return sorted(str((item.get("metadata") or {}).get("name"))
                      for item in self.list_all(kind, namespace))

    def applied_spec(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """status.appliedSpec (JSON text) as the spec body it was; None when absent or unreadable (then the
        current spec counts as applied: no change is classified, nothing restarts)."""
        text = (body.get("status") or {}).get(APPLIED)
        try:
            applied = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            return None
        return applied if isinstance(applied, dict) else None

    def replace_status(self, body: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        """Write `status` over the object's status, guarded by the resourceVersion of `body` (the read
        the status was planned from): Conflict when the object changed since."""
        meta = body["metadata"]
        new = {**body, "status": dict(status)}
        try:
            written: dict[str, Any] = self._call(
                self.custom.replace_namespaced_custom_object_status, GROUP, VERSION, meta["namespace"],
                PLURALS[str(body["kind"])], meta["name"], new)
        except ApiException as exc:
            if exc.status == 404:
                raise Conflict(f"{body['kind']} {meta['namespace']}/{meta['name']} is gone") from None
            raise KubeError(f"write the status of {body['kind']} {meta['namespace']}/{meta['name']}: "
                            f"{_message(exc)}") from None
        return written

    def set_finalizers(self, body: Mapping[str, Any], finalizers: list[str]) -> dict[str, Any]:
        """Replace metadata.finalizers, guarded by the resourceVersion of `body`."""
        meta = body["metadata"]
        patch = {"metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}}
        try:
            written: dict[str, Any] = self._call(
                self.custom.patch_namespaced_custom_object, GROUP, VERSION, meta["namespace"],
                PLURALS[str(body["kind"])], meta["name"], patch)
        except ApiException as exc:
            if exc.status == 404:
                raise Conflict(f"{body['kind']} {meta['namespace']}/{meta['name']} is gone") from None
            raise KubeError(f"set the finalizers of {body['kind']} {meta['namespace']}/{meta['name']}: "
                            f"{_message(exc)}") from None
        return written

    # -- pods (the Launcher protocol's operations; launch/kubernetes.py) --------------------------

    def create_pod(self, pod: Mapping[str, Any]) -> None:
        namespace = pod["metadata"]["namespace"]
        try:
            self._call(self.core.create_namespaced_pod, namespace, dict(pod))
        except Conflict:
            return   # created by an earlier pass: its name is the submission, so it is the same pod
        except ApiException as exc:
            raise KubeError(f"create pod {namespace}/{pod['metadata']['name']}: {_message(exc)}") from None

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            pod: dict[str, Any] = self._call(self.core.read_namespaced_pod, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeError(f"get pod {namespace}/{name}: {_message(exc)}") from None
        return pod

    def delete_pod(self, namespace: str, name: str) -> None:
        try:
            self._call(self.core.delete_namespaced_pod, name, namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise KubeError(f"delete pod {namespace}/{name}: {_message(exc)}") from None

    # -- Leases (leader election) ---------------------------------------------------------------

    def get_lease(self, namespace: str, name: str, *,
                  timeout_s: float | None = None) -> dict[str, Any] | None:
        try:
            lease: dict[str, Any] = self._call(self.coordination.read_namespaced_lease, name, namespace,
                                               timeout_s=timeout_s)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeError(f"get Lease {namespace}/{name}: {_message(exc)}") from None
        return lease

    def write_lease(self, namespace: str, name: str, spec: Mapping[str, Any], read: Mapping[str, Any] | None,
                    *, timeout_s: float | None = None) -> None:
        """Create the Lease (`read` None) or replace it, guarded by the resourceVersion of `read`:
        Conflict when another replica wrote it since."""
        body: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                "metadata": {"name": name, "namespace": namespace}, "spec": dict(spec)}
        try:
            if read is None:
                self._call(self.coordination.create_namespaced_lease, namespace, body, timeout_s=timeout_s)
            else:
                body["metadata"]["resourceVersion"] = read["metadata"]["resourceVersion"]
                self._call(self.coordination.replace_namespaced_lease, name, namespace, body,
                           timeout_s=timeout_s)
        except ApiException as exc:
            if exc.status == 404:
                raise Conflict(f"Lease {namespace}/{name} is gone") from None
            raise KubeError(f"write Lease {namespace}/{name}: {_message(exc)}") from None

    # -- Secrets -------------------------------------------------------------------------------

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        """One key of a Secret, decoded (None: no such Secret or key). Read when the operator itself
        must open a table's storage; never logged, never written anywhere."""
        try:
            secret = self._call(self.core.read_namespaced_secret, name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise KubeError(f"read Secret {namespace}/{name}: {_message(exc)}") from None
        encoded = (secret.get("data") or {}).get(key)
        return base64.b64decode(encoded).decode() if encoded is not None else None

    # -- Events --------------------------------------------------------------------------------

    def post_event(self, involved: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """A core/v1 Event on `involved` (what `kubectl describe` lists). Best effort: an Event that
        cannot be posted is logged, never a reconcile failure."""
        meta = involved["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": meta["namespace"]},
            "involvedObject": {"apiVersion": involved.get("apiVersion", API_VERSION),
                               "kind": involved["kind"], "name": meta["name"], "namespace": meta["namespace"],
                               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "type": type_, "reason": reason, "message": message[:1024], "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": COMPONENT}, "reportingComponent": COMPONENT,
        }
        try:
            self._call(self.core.create_namespaced_event, meta["namespace"], event)
        except (ApiException, Conflict, KubeError) as exc:
            log.warning("could not post Event %s on %s %s/%s: %s", reason, involved["kind"],
                        meta["namespace"], meta["name"], exc)


def with_applied(status: Mapping[str, Any], applied: Mapping[str, Any]) -> dict[str, Any]:
    """A LakeWriter's status carrying the spec its current submission runs (kept in status: the API has
    no other place the operator owns; GitOps tools ignore status)."""
    return {**status, APPLIED: json.dumps(applied, sort_keys=True, separators=(",", ":"))}


def _message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "").get("message") or exc.reason)
    except (TypeError, ValueError, AttributeError):
        return f"{exc.status} {exc.reason}"


__all__ = ["API_VERSION", "APPLIED", "GROUP", "PLURALS", "VERSION", "Conflict", "Kube", "KubeError",
           "connect", "with_applied"]
