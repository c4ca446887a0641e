"""A tiny synchronous Kubernetes API client for tests and the process kubelet.

Owns talking JSON over HTTPS to an API server (the real kube-apiserver of tests/support/kube_server.py,
or the fault proxy in front of it: TLS with the cluster's CA and a client certificate or a bearer
token): create/get/list/replace/patch/delete, watches, and waiting for an object's state through a watch.
One connection per call; no retries (a test sees every failure).
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

Obj = dict[str, Any]
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}


def resource_path(
    api_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    parts = [base] + ([f"namespaces/{namespace}"] if namespace else []) + [plural]
    parts += [name] if name else []
    parts += [subresource] if subresource else []
    return "/".join(parts)


class KubeClientError(Exception):
    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body


class KubeServer(Protocol):
    """What the process kubelet needs of an API server (kube_server.ControlPlane)."""

    def client(self) -> KubeClient:
        """An admin's client."""
        ...

    def kubelet_tls(self, node_name: str) -> ssl.SSLContext:
        """The TLS of a kubelet's own endpoint, where the API server asks for pods' logs."""
        ...


class KubeClient:
    """JSON over HTTP, or HTTPS when given an `ssl_context`; a bearer `token` if given."""

    def __init__(self, url: str, *, ssl_context: ssl.SSLContext | None = None, token: str | None = None,
                 user_agent: str = "weir-tests") -> None:
        parsed = urllib.parse.urlsplit(url)
        self.https = parsed.scheme == "https"
        if self.https and ssl_context is None:
            raise ValueError(f"{url} is HTTPS: pass the cluster's ssl_context")
        self.host, self.port = parsed.hostname or "127.0.0.1", parsed.port or (443 if self.https else 80)
        self.ssl_context = ssl_context
        self.headers = {"User-Agent": user_agent, **({"Authorization": f"Bearer {token}"} if token else {})}

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=self.ssl_context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        query = ("?" + urllib.parse.urlencode(params)) if params else ""
        connection = self._connection(30)
        try:
            payload = None if body is None else json.dumps(body).encode()
            connection.request(method, path + query, body=payload,
                               headers={**self.headers, "Content-Type": content_type})
            response = connection.getresponse()
            raw = response.read()
            try:
                data = json.loads(raw or b"null")
            except ValueError:  # plain text (e.g. /readyz, pods/log)
                data = raw.decode(errors="replace")
            if response.status >= 400:
                raise KubeClientError(response.status, data)
            return data
        finally:
            connection.close()

    def get(self, path: str, **params: str) -> Any:
        return self.request("GET", path, params=params)

    def create(self, path: str, body: Obj) -> Any:
        return self.request("POST", path, body)

    def replace(self, path: str, body: Obj) -> Any:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: Any, kind: str = "merge", **params: str) -> Any:
        return self.request("PATCH", path, body, content_type=PATCH_TYPES[kind], params=params)

    def delete(self, path: str, **body: Any) -> Any:
        return self.request("DELETE", path, body or None)

    def watch(self, path: str, *, timeout: float = 30,
              opened: Callable[[http.client.HTTPConnection], None] | None = None,
              **params: str) -> Iterator[dict[str, Any]]:
        """Yields watch events until the server ends the stream or `timeout` seconds of silence pass.
        `opened` gets the connection (another thread may shut its socket down to end the watch)."""
        query = urllib.parse.urlencode({**params, "watch": "true"})
        connection = self._connection(timeout)
        try:
            connection.request("GET", f"{path}?{query}", headers=self.headers)
            if opened is not None:
                opened(connection)
            response = connection.getresponse()
            if response.status >= 400:
                raise KubeClientError(response.status, response.read())
            for line in response:
                if line.strip():
                    yield json.loads(line)
        finally:
            connection.close()

    def wait_for(self, path: str, predicate: Callable[[Obj], bool], *, timeout: float = 30) -> Obj:
        """The object at `path` once it exists and `predicate` holds (watching it, no polling)."""
        parent, name = path.rsplit("/", 1)
        try:
            current = self.get(path)
            if predicate(current):
                return current
            version = current["metadata"]["resourceVersion"]
        except KubeClientError as error:
            if error.status != 404:
                raise
            listing = self.get(parent, fieldSelector=f"metadata.name={name}")  # created since the get?
            for item in listing["items"]:
                if predicate(item):
                    return dict(item)
            version = listing["metadata"]["resourceVersion"]
        for event in self.watch(
            parent,
            timeout=timeout,
            fieldSelector=f"metadata.name={name}",
            resourceVersion=version,
        ):
            if event["type"] in {"ADDED", "MODIFIED"} and predicate(event["object"]):
                return dict(event["object"])
        raise TimeoutError(f"{path} did not reach the expected state within {timeout}s")

    def wait_deleted(self, path: str, *, timeout: float = 30) -> None:
        parent, name = path.rsplit("/", 1)
        try:
            current = self.get(path)
        except KubeClientError as error:
            if error.status == 404:
                return
            raise
        for event in self.watch(
            parent,
            timeout=timeout,
            fieldSelector=f"metadata.name={name}",
            resourceVersion=current["metadata"]["resourceVersion"],
        ):
            if event["type"] == "DELETED":
                return
        raise TimeoutError(f"{path} was not deleted within {timeout}s")


def secret_value(secret: Obj, key: str) -> str | None:
    if key in (secret.get("stringData") or {}):
        return str(secret["stringData"][key])
    encoded = (secret.get("data") or {}).get(key)
    return None if encoded is None else base64.b64decode(encoded).decode()
