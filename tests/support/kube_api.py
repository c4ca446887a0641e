"""A Kubernetes API emulator for tests: kmock's discovery and HTTP server, with a real object store.

Owns the emulated API server: `KubeApiHandler` (a `kmock.KubernetesScaffold` subclass) keeps the
objects and serves create/get/list/watch/replace/patch/delete for every registered resource, with what
kmock leaves out: metadata.uid, a monotonic resourceVersion that changes on every write, generation
(bumped on spec changes only), creationTimestamp, `/status` isolation, label and field selectors,
watches that resume from a resourceVersion, merge/JSON/strategic-merge patches, server-side apply of
a missing object, finalizers (deletionTimestamp until they are gone) and ownerReferences garbage
collection. Applying a CustomResourceDefinition registers its resource in discovery.
`KubeApi` runs the handler on 127.0.0.1 on a free port in its own thread (usable from sync tests, a
kopf operator thread and kubectl subprocesses); `client()` gives a `KubeClient` (kube_client.py).

Tests can make a verb on a resource fail (`KubeApiHandler.faults`, e.g. POST pods -> 503).
Not emulated: schema validation, admission, CEL, namespace existence and deletion of their contents,
protobuf bodies (415: kubectl `create`/`run` of built-in kinds sends protobuf; `kubectl apply` sends JSON
and works), watch bookmarks and 410 Gone (the whole event history is kept), foreground deletion (GC
is immediate, in the same write), pod restarts (see kubelet.py). kopf's k8s-event posting is untested.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime
import gzip
import importlib.resources
import json
import re
import ssl
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml
from typing_extensions import override

# re-exported: the emulator's tests import the client from here
from tests.support.kube_client import KubeClient as KubeClient
from tests.support.kube_client import KubeClientError as KubeClientError
from tests.support.kube_client import resource_path as resource_path
from tests.support.kube_client import secret_value as secret_value

ResourceKey = tuple[str, str, str]  # group, version, plural
ObjectKey = tuple[ResourceKey, str | None, str]  # resource, namespace, name
Obj = dict[str, Any]

CRD_RESOURCE: ResourceKey = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# Built-in resources the emulator serves (kmock's bundled discovery knows their kinds and verbs).
CORE_RESOURCES = (
    "v1/namespaces",
    "v1/pods",
    "v1/nodes",  # the process kubelet registers its node
    "v1/events",
    "v1/configmaps",
    "v1/secrets",
    "v1/serviceaccounts",
    "v1/services",
    "coordination.k8s.io/v1/leases",
    "networking.k8s.io/v1/networkpolicies",  # spark-submit (cluster mode) applies one per application
    "events.k8s.io/v1/events",
    "apiextensions.k8s.io/v1/customresourcedefinitions",
)


class KubeApiError(Exception):
    """A request the emulator answers with a Kubernetes Status error."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json_path(obj: Obj, path: str) -> Any:
    """A printer column's value: dotted paths (`.status.phase`) and one filter form,
    `.status.conditions[?(@.type=="Ready")].status`; missing is None."""
    node: Any = obj
    for part in re.findall(r'[^.\[\]]+|\[\?\(@\.\w+=="[^"]*"\)\]', path):
        if part.startswith("[?"):
            key, value = re.match(r'\[\?\(@\.(\w+)=="([^"]*)"\)\]', part).groups()  # type: ignore[union-attr]
            node = next((i for i in node or () if isinstance(i, dict) and i.get(key) == value), None)
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return None
        if node is None:
            return None
    return node


# ---------------------------------------------------------------- selectors


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    op: str  # = != in notin exists !exists
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "!exists":
            return self.key not in labels
        if self.op in {"=", "in"}:
            return labels.get(self.key) in self.values
        return labels.get(self.key) not in self.values  # != and notin


_SET_REQUIREMENT = re.compile(r"^\s*([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def parse_label_selector(text: str) -> list[LabelRequirement]:
    """`a=b,c!=d,e in (x,y),f notin (z),g,!h` -> requirements (all must hold)."""
    parts: list[str] = []
    depth, current = 0, ""
    for char in text:  # split on commas outside parentheses
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    requirements = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        if match := _SET_REQUIREMENT.match(part):
            values = frozenset(v.strip() for v in match.group(3).split(",") if v.strip())
            requirements.append(LabelRequirement(match.group(1), match.group(2), values))
        elif "!=" in part:
            key, value = part.split("!=", 1)
            requirements.append(LabelRequirement(key.strip(), "!=", frozenset({value.strip()})))
        elif "=" in part:
            key, value = part.replace("==", "=").split("=", 1)
            requirements.append(LabelRequirement(key.strip(), "=", frozenset({value.strip()})))
        elif part.startswith("!"):
            requirements.append(LabelRequirement(part[1:].strip(), "!exists", frozenset()))
        else:
            requirements.append(LabelRequirement(part, "exists", frozenset()))
    return requirements


def parse_field_selector(text: str) -> list[tuple[str, bool, str]]:
    """`metadata.name=x,status.phase!=Running` -> [(path, equal, value)]."""
    result = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if "!=" in part:
            path, value = part.split("!=", 1)
            result.append((path.strip(), False, value.strip()))
        else:
            path, value = part.replace("==", "=").split("=", 1)
            result.append((path.strip(), True, value.strip()))
    return result


def _field(obj: Obj, path: str) -> str:
    value: Any = obj
    for step in path.split("."):
        value = value.get(step) if isinstance(value, dict) else None
    return "" if value is None else str(value)


def selected(obj: Obj, labels: list[LabelRequirement], fields: list[tuple[str, bool, str]]) -> bool:
    object_labels = obj.get("metadata", {}).get("labels") or {}
    return all(r.matches(object_labels) for r in labels) and all(
        (_field(obj, path) == value) == equal for path, equal, value in fields
    )


# ---------------------------------------------------------------- patches


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# list fields whose items a strategic merge matches by another key than `name` (pod and node conditions)
MERGE_KEYS = {"conditions": "type", "addresses": "type"}


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Enough of strategic merge for kubectl and a kubelet: lists of dicts merge by `name` (conditions and
    addresses by `type`); directives dropped."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        old = result.get(key)
        if value is None:
            result.pop(key, None)
        elif (isinstance(value, list) and isinstance(old, list)
              and _keyed_dicts(value, merge_key := MERGE_KEYS.get(key, "name"))
              and _keyed_dicts(old, merge_key)):
            merged = {item[merge_key]: item for item in old}
            for item in value:
                if item.get("$patch") == "delete":
                    merged.pop(item[merge_key], None)
                else:
                    merged[item[merge_key]] = strategic_merge_patch(merged.get(item[merge_key]), item)
            result[key] = list(merged.values())
        else:
            result[key] = strategic_merge_patch(old, value)
    return result


def _keyed_dicts(items: list[Any], key: str) -> bool:
    return all(isinstance(item, dict) and key in item for item in items)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def _container(document: Any, parts: list[str]) -> Any:
    for part in parts:
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


def json_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    document = copy.deepcopy(document)
    for operation in operations:
        op, parts = operation["op"], _pointer(operation["path"])
        try:
            if op == "test":
                if _container(document, parts) != operation["value"]:
                    raise KubeApiError(
                        422,
                        "Invalid",
                        f"the test operation on {operation['path']} failed: "
                        "the value differs; re-read the object and patch again",
                    )
                continue
            if op in {"move", "copy"}:
                value = copy.deepcopy(_container(document, _pointer(operation["from"])))
                if op == "move":
                    document = json_patch(document, [{"op": "remove", "path": operation["from"]}])
                document = json_patch(document, [{"op": "add", "path": operation["path"], "value": value}])
                continue
            if not parts:
                if op in {"add", "replace"}:
                    document = copy.deepcopy(operation["value"])
                    continue
                raise KubeApiError(
                    422, "Invalid", "cannot remove the whole document; delete the object instead"
                )
            parent, last = _container(document, parts[:-1]), parts[-1]
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if op == "add":
                    parent.insert(index, copy.deepcopy(operation["value"]))
                elif op == "remove":
                    del parent[index]
                else:
                    parent[index] = copy.deepcopy(operation["value"])
            elif op == "add":
                parent[last] = copy.deepcopy(operation["value"])
            elif op == "remove":
                del parent[last]
            else:
                if last not in parent:
                    raise KeyError(last)
                parent[last] = copy.deepcopy(operation["value"])
        except (KeyError, IndexError, ValueError, TypeError) as error:
            raise KubeApiError(
                422,
                "Invalid",
                f"json patch {op} {operation['path']} failed ({error!r}); fix the patch's paths",
            ) from error
    return document


# ---------------------------------------------------------------- the handler


def _encode_string_data(resource: ResourceKey, obj: Obj) -> None:
    """A Secret's stringData is write-only: the server folds it into data (base64)."""
    if resource == ("", "v1", "secrets") and "stringData" in obj:
        data = obj.setdefault("data", {}) or {}
        for key, value in (obj.pop("stringData") or {}).items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


@dataclass(frozen=True)
class Call:
    """One HTTP request to a resource path."""

    method: str
    params: dict[str, str]
    headers: dict[str, str]
    text: str
    raw: aiohttp.web.BaseRequest


@dataclass
class WatchEvent:
    resource_version: int
    resource: ResourceKey
    type: str
    object: Obj


@attrs.define(kw_only=True)
class KubeApiHandler(kmock.KubernetesScaffold):
    """kmock's scaffold (discovery, errors, HTTP) with the object store of a small API server."""

    store: dict[ObjectKey, Obj] = attrs.field(factory=dict, init=False)
    events: list[WatchEvent] = attrs.field(factory=list, init=False)
    revision: int = attrs.field(default=1, init=False)
    _changed: asyncio.Condition | None = attrs.field(default=None, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    # where a pod's container log is (the process kubelet registers it): served as pods/NAME/log
    pod_logs: dict[tuple[str, str], Path] = attrs.field(factory=dict, init=False)
    # a CRD version's additionalPrinterColumns, for `kubectl get` (server-side Table rendering)
    printer_columns: dict[ResourceKey, list[dict[str, Any]]] = attrs.field(factory=dict, init=False)
    # injected faults: (HTTP method, plural) -> (code, reason, message) answered instead of serving it
    faults: dict[tuple[str, str], tuple[int, str, str]] = attrs.field(factory=dict, init=False)

    @override
    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        bundled = kmock.ResourcesArray()
        # kmock's load_bundled() uses a deprecated importlib call (warnings are errors here)
        bundled.load_data(
            gzip.decompress((importlib.resources.files("kmock._internal") / "resources.json.gz").read_bytes())
        )
        for key in CORE_RESOURCES:
            self.resources[key] = bundled[key]
        for name in ("default", "kube-system"):
            self._write(
                (("", "v1", "namespaces"), None, name),
                self._stamp(
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": name},
                        "status": {"phase": "Active"},
                    }
                ),
                "ADDED",
            )

    # ------------------------------------------------------------ registration

    def register_crd(self, crd: Mapping[str, Any]) -> None:
        """Serve the resource(s) a CustomResourceDefinition declares (every served version)."""
        spec = crd["spec"]
        names = spec["names"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            key = f"{spec['group']}/{version['name']}/{names['plural']}"
            self.resources[key] = kmock.ResourceInfo(
                kind=names["kind"],
                singular=names.get("singular") or names["kind"].lower(),
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                verbs=set(ALL_VERBS),
                shortnames=set(names.get("shortNames", [])),
                categories=set(names.get("categories", [])),
                subresources={"status"} if "status" in (version.get("subresources") or {}) else set(),
            )
            self.printer_columns[(spec["group"], version["name"], names["plural"])] = list(
                version.get("additionalPrinterColumns") or [])

    @override
    async def _serve_version(self, request: kmock.Request) -> Any:
        listing: dict[str, Any] = dict(await super()._serve_version(request))  # type: ignore[arg-type]
        if listing["groupVersion"].startswith("/"):  # the core group has no "group/" prefix
            listing["groupVersion"] = listing["groupVersion"][1:]
        for entry in listing["resources"]:
            if "/" in entry["name"]:  # subresources carry no short names or categories
                entry["shortNames"], entry["categories"] = [], []
        return listing

    def _table(self, resource: ResourceKey, items: list[Obj], metadata: Obj) -> Obj:
        """A meta.k8s.io/v1 Table as `kubectl get` asks for it: the name, then a CRD's printer columns
        (simple JSONPaths), or the age for other resources."""
        columns: list[dict[str, Any]] = [{"name": "Name", "type": "string", "format": "name",
                                          "description": "the name"}]
        extra = self.printer_columns.get(resource, [])
        columns += [{"name": c["name"], "type": c.get("type", "string"), "format": c.get("format", ""),
                     "description": c.get("description", ""), "priority": c.get("priority", 0)}
                    for c in extra]
        if not extra:   # the API server's default columns; a CRD's printer columns replace them
            extra = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
            columns.append({"name": "Age", "type": "date", "format": "", "description": "", "priority": 0})
        rows = []
        for obj in items:
            cells: list[Any] = [obj["metadata"]["name"]]
            cells += [_json_path(obj, c["jsonPath"]) for c in extra]
            partial = {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                       "metadata": obj["metadata"]}
            rows.append({"cells": cells, "object": partial})
        return {"apiVersion": "meta.k8s.io/v1", "kind": "Table", "metadata": metadata,
                "columnDefinitions": columns, "rows": rows}

    def _info(self, resource: ResourceKey) -> kmock.ResourceInfo | None:
        key = f"{resource[0]}/{resource[1]}/{resource[2]}" if resource[0] else f"{resource[1]}/{resource[2]}"
        # not .get(): only __getitem__ narrows the stored value to a ResourceInfo
        return self.resources[key] if key in self.resources else None  # noqa: SIM401

    def _has_status(self, resource: ResourceKey) -> bool:
        info = self._info(resource)
        return info is not None and "status" in info.subresources

    # ------------------------------------------------------------ HTTP entry

    @override
    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        route = self._route(raw_request.path)
        if route is None:
            return await super().__call__(raw_request)  # discovery, /version, user reactions
        call = Call(
            method=raw_request.method.upper(),
            params=dict(raw_request.query),
            headers=dict(raw_request.headers),
            text=await raw_request.text(),
            raw=raw_request,
        )
        try:
            fault = self.faults.get((call.method, route[0][2]))
            if fault is not None and route[3] is None:
                raise KubeApiError(*fault)
            return await self._serve(call, *route)
        except KubeApiError as error:
            return aiohttp.web.json_response(
                {
                    "apiVersion": "v1",
                    "kind": "Status",
                    "metadata": {},
                    "status": "Failure",
                    "code": error.code,
                    "reason": error.reason,
                    "message": error.message,
                },
                status=error.code,
            )

    def _route(self, path: str) -> tuple[ResourceKey, str | None, str | None, str | None] | None:
        parts = [p for p in path.split("/") if p]
        if len(parts) >= 3 and parts[0] == "api":
            group, version, rest = "", parts[1], parts[2:]
        elif len(parts) >= 4 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        resource = (group, version, rest[0])
        info = self._info(resource)
        if info is None:
            return None
        if not info.namespaced:
            namespace = None
        name = rest[1] if len(rest) > 1 else None
        subresource = "/".join(rest[2:]) or None
        return resource, namespace, name, subresource

    async def _serve(
        self,
        request: Call,
        resource: ResourceKey,
        namespace: str | None,
        name: str | None,
        subresource: str | None,
    ) -> aiohttp.web.StreamResponse:
        method, params = request.method, request.params
        if "protobuf" in request.headers.get("Content-Type", ""):
            raise KubeApiError(
                415,
                "UnsupportedMediaType",
                "the emulator speaks JSON only; send JSON "
                "(kubectl: --kube-api-content-type=application/json)",
            )
        if self._changed is None:
            self._changed = asyncio.Condition()
        if method == "GET" and params.get("watch") in {"true", "1"}:
            return await self._watch(request, resource, namespace, name)
        as_table = "as=Table" in request.headers.get("Accept", "")
        if method == "GET" and name is None:
            listing = self.list_objects(resource, namespace, params)
            if as_table:
                return aiohttp.web.json_response(self._table(resource, listing["items"], listing["metadata"]))
            return aiohttp.web.json_response(listing)
        if method == "GET" and name is not None and subresource == "log" and resource == ("", "v1", "pods"):
            self._get(resource, namespace, name)  # 404 for a missing pod
            log_path = self.pod_logs.get((namespace or "default", name))
            text = log_path.read_text(errors="replace") if log_path is not None and log_path.exists() else ""
            if params.get("tailLines"):
                text = "".join(text.splitlines(keepends=True)[-int(params["tailLines"]) :])
            return aiohttp.web.Response(text=text, content_type="text/plain")
        if method == "GET" and name is not None:
            obj = self._get(resource, namespace, name)
            if as_table:
                meta = {"resourceVersion": str(self.revision)}
                return aiohttp.web.json_response(self._table(resource, [obj], meta))
            return aiohttp.web.json_response(obj)
        dry_run = bool(params.get("dryRun"))
        if method == "POST" and name is None:
            body = self._body(request)
            result = self.create_object(resource, namespace, body, dry_run=dry_run)
            await self._notify()
            return aiohttp.web.json_response(result, status=201)
        if method == "DELETE" and name is None:
            selection = self.list_objects(resource, namespace, params)["items"]
            for item in selection:
                if (resource, item["metadata"].get("namespace"), item["metadata"]["name"]) in self.store:
                    self.delete_object(resource, item["metadata"].get("namespace"), item["metadata"]["name"])
            await self._notify()
            return aiohttp.web.json_response(
                {**self.list_objects(resource, namespace, {}), "items": selection}
            )
        if name is None:
            raise KubeApiError(
                405, "MethodNotAllowed", f"{method} is not served on a collection; address one object by name"
            )
        if method == "DELETE":
            options = json.loads(request.text) if request.text.strip().startswith("{") else {}
            policy = options.get("propagationPolicy")
            result = self.delete_object(
                resource, namespace, name, orphan=(policy or params.get("propagationPolicy")) == "Orphan"
            )
            await self._notify()
            return aiohttp.web.json_response(result)
        if method == "POST" and subresource == "binding" and resource == ("", "v1", "pods"):
            result = self.bind_pod(namespace or "default", name, self._body(request))
            await self._notify()
            return aiohttp.web.json_response(result, status=201)
        if method == "PUT":
            result = self.replace_object(
                resource, namespace, name, self._body(request), subresource, dry_run=dry_run
            )
            await self._notify()
            return aiohttp.web.json_response(result)
        if method == "PATCH":
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            result, created = self.patch_object(
                resource, namespace, name, content_type, request.text, subresource, dry_run=dry_run
            )
            await self._notify()
            return aiohttp.web.json_response(result, status=201 if created else 200)
        raise KubeApiError(
            405, "MethodNotAllowed", f"{method} is not served by the emulator; use GET/POST/PUT/PATCH/DELETE"
        )

    @staticmethod
    def _body(request: Call) -> Obj:
        try:
            body = (
                json.loads(request.text)
                if request.text.strip().startswith("{")
                else yaml.safe_load(request.text)
            )
        except (ValueError, yaml.YAMLError) as error:
            raise KubeApiError(
                400, "BadRequest", f"the body is not JSON/YAML ({error}); send an object"
            ) from error
        if not isinstance(body, dict):
            raise KubeApiError(400, "BadRequest", "the body is not an object; send a JSON object")
        return body

    async def _notify(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    async def close_watches(self) -> None:
        """End every open watch stream (the server is stopping)."""
        self._closing = True
        if self._changed is not None:
            await self._notify()

    async def _watch(
        self, request: Call, resource: ResourceKey, namespace: str | None, name: str | None
    ) -> aiohttp.web.StreamResponse:
        assert self._changed is not None
        params = request.params
        labels = parse_label_selector(params.get("labelSelector", ""))
        fields = parse_field_selector(params.get("fieldSelector", ""))
        if name is not None:
            fields.append(("metadata.name", True, name))
        timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
        since = int(params.get("resourceVersion") or 0)
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request.raw)
        if since == 0:  # a watch without a version starts with the current state
            for obj in self.list_objects(resource, namespace, params)["items"]:
                if name is None or obj["metadata"]["name"] == name:
                    await response.write(json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n")
            since = self.revision
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        position = 0
        try:
            while not self._closing:
                while position < len(self.events) and self.events[position].resource_version <= since:
                    position += 1
                for event in self.events[position:]:
                    position += 1
                    since = event.resource_version
                    obj = event.object
                    if (
                        event.resource == resource
                        and (namespace is None or obj["metadata"].get("namespace") == namespace)
                        and selected(obj, labels, fields)
                    ):
                        line = json.dumps({"type": event.type, "object": obj})
                        await response.write(line.encode() + b"\n")
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    break
                async with self._changed:
                    if position >= len(self.events) and not self._closing:
                        try:
                            await asyncio.wait_for(self._changed.wait(), remaining)
                        except TimeoutError:
                            break
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass  # the client went away: the watch simply ends
        return response

    # ------------------------------------------------------------ store operations (sync, in the loop)

    def _stamp(self, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = _now()
        meta["generation"] = 1
        return obj

    def _write(self, key: ObjectKey, obj: Obj | None, event_type: str, old: Obj | None = None) -> None:
        self.revision += 1
        if obj is None:
            assert old is not None
            final = copy.deepcopy(old)
            final["metadata"]["resourceVersion"] = str(self.revision)
            self.store.pop(key, None)
            self.events.append(WatchEvent(self.revision, key[0], "DELETED", final))
            return
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self.store[key] = obj
        self.events.append(WatchEvent(self.revision, key[0], event_type, copy.deepcopy(obj)))

    def _get(self, resource: ResourceKey, namespace: str | None, name: str) -> Obj:
        obj = self.store.get((resource, namespace, name))
        if obj is None:
            raise KubeApiError(404, "NotFound", f'{resource[2]} "{name}" not found; create it first')
        return copy.deepcopy(obj)

    def list_objects(self, resource: ResourceKey, namespace: str | None, params: Mapping[str, str]) -> Obj:
        labels = parse_label_selector(params.get("labelSelector", ""))
        fields = parse_field_selector(params.get("fieldSelector", ""))
        items = [
            copy.deepcopy(obj)
            for (res, ns, _), obj in sorted(self.store.items(), key=lambda kv: str(kv[0]))
            if res == resource and (namespace is None or ns == namespace) and selected(obj, labels, fields)
        ]
        info = self._info(resource)
        kind = (info.kind if info is not None and info.kind else resource[2]) + "List"
        api_version = f"{resource[0]}/{resource[1]}" if resource[0] else resource[1]
        return {
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"resourceVersion": str(self.revision)},
            "items": items,
        }

    def create_object(
        self, resource: ResourceKey, namespace: str | None, body: Obj, *, dry_run: bool = False
    ) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            raise KubeApiError(422, "Invalid", "metadata.name is required; set name or generateName")
        info = self._info(resource)
        if info is not None and info.namespaced:
            namespace = namespace or meta.get("namespace") or "default"
            meta["namespace"] = namespace
        else:
            namespace = None
            meta.pop("namespace", None)
        key = (resource, namespace, meta["name"])
        if key in self.store:
            raise KubeApiError(
                409,
                "AlreadyExists",
                f'{resource[2]} "{meta["name"]}" already exists; patch or replace it instead',
            )
        obj.setdefault("apiVersion", f"{resource[0]}/{resource[1]}" if resource[0] else resource[1])
        if info is not None and info.kind:
            obj.setdefault("kind", info.kind)
        for field in ("resourceVersion", "deletionTimestamp", "uid"):
            meta.pop(field, None)
        if self._has_status(resource):
            obj.pop("status", None)
        if resource == ("", "v1", "pods"):
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}  # until a kubelet takes it
        _encode_string_data(resource, obj)
        self._stamp(obj)
        if resource == CRD_RESOURCE:
            obj["status"] = {
                "conditions": [
                    {"type": t, "status": "True", "reason": t, "lastTransitionTime": _now(), "message": ""}
                    for t in ("NamesAccepted", "Established")
                ],
                "acceptedNames": obj["spec"]["names"],
            }
        if dry_run:
            return obj
        self._write(key, obj, "ADDED")
        if resource == CRD_RESOURCE:
            self.register_crd(obj)
        return copy.deepcopy(obj)

    def _update(self, key: ObjectKey, old: Obj, new: Obj, subresource: str | None, *, dry_run: bool) -> Obj:
        """The common tail of replace and patch: isolation, preconditions, generation, write."""
        resource = key[0]
        expected = (new.get("metadata") or {}).get("resourceVersion")
        if expected and expected != old["metadata"]["resourceVersion"]:
            raise KubeApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {resource[2]} "{key[2]}": '
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
            )
        if subresource == "status":
            result = copy.deepcopy(old)
            if "status" in new:
                result["status"] = new["status"]
            else:
                result.pop("status", None)
        elif subresource is not None:
            raise KubeApiError(404, "NotFound", f"subresource {subresource} is not served; use status")
        else:
            result = new
            if self._has_status(resource):
                if "status" in old:
                    result["status"] = old["status"]
                else:
                    result.pop("status", None)
        meta = result.setdefault("metadata", {})
        for field in ("uid", "creationTimestamp", "name", "namespace", "generation", "resourceVersion"):
            if field in old["metadata"]:
                meta[field] = old["metadata"][field]
            else:
                meta.pop(field, None)
        if "deletionTimestamp" in old["metadata"]:
            meta["deletionTimestamp"] = old["metadata"]["deletionTimestamp"]
        _encode_string_data(resource, result)
        spec_old = {k: v for k, v in old.items() if k not in {"metadata", "status"}}
        spec_new = {k: v for k, v in result.items() if k not in {"metadata", "status"}}
        if spec_old != spec_new:
            meta["generation"] = int(old["metadata"].get("generation", 1)) + 1
        if result == old or dry_run:
            return copy.deepcopy(result)
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._remove(key, result)
            return copy.deepcopy(result)
        self._write(key, result, "MODIFIED")
        if resource == CRD_RESOURCE:
            self.register_crd(result)
        return copy.deepcopy(result)

    def replace_object(
        self,
        resource: ResourceKey,
        namespace: str | None,
        name: str,
        body: Obj,
        subresource: str | None = None,
        *,
        dry_run: bool = False,
    ) -> Obj:
        old = self._get(resource, namespace, name)
        return self._update(
            (resource, namespace, name), old, copy.deepcopy(body), subresource, dry_run=dry_run
        )

    def patch_object(
        self,
        resource: ResourceKey,
        namespace: str | None,
        name: str,
        content_type: str,
        text: str,
        subresource: str | None = None,
        *,
        dry_run: bool = False,
    ) -> tuple[Obj, bool]:
        key = (resource, namespace, name)
        old = self.store.get(key)
        if content_type == "application/apply-patch+yaml":
            body = yaml.safe_load(text)
            if old is None:  # server-side apply creates a missing object
                body.setdefault("metadata", {})["name"] = name
                return self.create_object(resource, namespace, body, dry_run=dry_run), True
            new = merge_patch(copy.deepcopy(old), body)
            return self._update(key, copy.deepcopy(old), new, subresource, dry_run=dry_run), False
        old = self._get(resource, namespace, name)
        try:
            patch_body = json.loads(text)
        except ValueError as error:
            raise KubeApiError(400, "BadRequest", f"the patch is not JSON ({error}); send JSON") from error
        if content_type == "application/json-patch+json":
            if not isinstance(patch_body, list):
                raise KubeApiError(400, "BadRequest", "a JSON patch is a list of operations; send a list")
            new = json_patch(old, patch_body)
            new.setdefault("metadata", {}).pop("resourceVersion", None)  # a test op is the precondition
            if any(op.get("path") == "/metadata/resourceVersion" for op in patch_body):
                new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        elif content_type == "application/strategic-merge-patch+json":
            new = strategic_merge_patch(copy.deepcopy(old), patch_body)
            new["metadata"]["resourceVersion"] = (patch_body.get("metadata") or {}).get("resourceVersion")
        elif content_type in {"application/merge-patch+json", "application/json", ""}:
            new = merge_patch(copy.deepcopy(old), patch_body)
            new["metadata"]["resourceVersion"] = (patch_body.get("metadata") or {}).get("resourceVersion")
        else:
            raise KubeApiError(
                415,
                "UnsupportedMediaType",
                f"patch type {content_type!r} is not served; use "
                "merge, strategic-merge, json or apply patches",
            )
        return self._update(key, old, new, subresource, dry_run=dry_run), False

    def bind_pod(self, namespace: str, name: str, binding: Obj) -> Obj:
        """pods/NAME/binding (what a scheduler posts): the pod goes to the target node, once."""
        key: ObjectKey = (("", "v1", "pods"), namespace, name)
        pod = copy.deepcopy(self._get(*key))
        node = (binding.get("target") or {}).get("name")
        if not node:
            raise KubeApiError(400, "BadRequest", "a Binding needs target.name (the node)")
        if pod["spec"].get("nodeName"):
            raise KubeApiError(409, "Conflict",
                               f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"')
        pod["spec"]["nodeName"] = node
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": _now()})
        self._write(key, pod, "MODIFIED")
        return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 201}

    def delete_object(
        self, resource: ResourceKey, namespace: str | None, name: str, *, orphan: bool = False
    ) -> Obj:
        key = (resource, namespace, name)
        old = self._get(resource, namespace, name)
        meta = old["metadata"]
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = _now()
                meta["deletionGracePeriodSeconds"] = 0
                self._write(key, old, "MODIFIED")
            return copy.deepcopy(old)
        self._remove(key, old, orphan=orphan)
        return old

    def _remove(self, key: ObjectKey, obj: Obj, *, orphan: bool = False) -> None:
        """Delete for real, then collect the dependents this object owned (background propagation)."""
        self._write(key, None, "DELETED", old=obj)
        if key[0] == CRD_RESOURCE:  # its resources go, and every object of them
            for version in obj["spec"]["versions"]:
                served = (obj["spec"]["group"], version["name"], obj["spec"]["names"]["plural"])
                resource_key = "/".join(served)
                if resource_key in self.resources:
                    del self.resources[resource_key]
                for object_key, custom in list(self.store.items()):
                    if object_key[0] == served:
                        self._write(object_key, None, "DELETED", old=custom)
        uid = obj["metadata"]["uid"]
        for dependent_key, dependent in list(self.store.items()):
            references = dependent["metadata"].get("ownerReferences") or []
            remaining = [ref for ref in references if ref.get("uid") != uid]
            if len(remaining) == len(references) or dependent_key not in self.store:
                continue
            if orphan or remaining:
                updated = copy.deepcopy(dependent)
                updated["metadata"]["ownerReferences"] = remaining
                self._write(dependent_key, updated, "MODIFIED")
            else:
                self.delete_object(*dependent_key)


# ---------------------------------------------------------------- the server thread


class KubeApi:
    """Runs `KubeApiHandler` on 127.0.0.1 (free port) in a background thread; a context manager."""

    def __init__(self) -> None:
        self.handler = KubeApiHandler()
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="kube-api", daemon=True)
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._serve())
        except BaseException as error:  # reported to the starting thread
            self._error = error
            self._ready.set()
        finally:
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with self.handler, kmock.Server(self.handler) as server:
            self.port = server.port
            self._ready.set()
            await self._stop.wait()
            await self.handler.close_watches()

    def start(self) -> KubeApi:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None or not self.port:
            raise RuntimeError(
                f"the Kubernetes API emulator did not start ({self._error!r}); see the traceback"
            )
        return self

    def stop(self) -> None:
        if self._stop is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def __enter__(self) -> KubeApi:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, function: Callable[[], Any]) -> Any:
        """Run `function` on the server's loop (store access from another thread)."""

        async def run() -> Any:
            result = function()
            await self.handler._notify()
            return result

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def register_crd(self, crd: Mapping[str, Any]) -> None:
        """Serve a CRD's resource without storing the CRD object (applying the CRD does both)."""
        self.call(lambda: self.handler.register_crd(crd))

    def apply_crds(self, *paths: Path) -> list[str]:
        """Creates every CustomResourceDefinition in the YAML files (crds/*.yaml); returns their names."""
        client, names = self.client(), []
        for path in paths:
            for document in yaml.safe_load_all(path.read_text()):
                if document and document.get("kind") == "CustomResourceDefinition":
                    client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", document)
                    names.append(document["metadata"]["name"])
        return names

    def kopf_connection(self, namespace: str = "default") -> Any:
        """A `kopf.ConnectionInfo` for an `@kopf.on.login` handler (kopf reads no kubeconfig itself)."""
        import kopf

        return kopf.ConnectionInfo(server=self.url, token="emulator", default_namespace=namespace)

    def client(self) -> KubeClient:
        return KubeClient(self.url)

    def publish_pod_log(self, namespace: str, name: str, path: Path) -> None:
        """Serve `path` as the pod's log (`pods/NAME/log`, `kubectl logs`)."""
        self.call(lambda: self.handler.pod_logs.__setitem__((namespace, name), path))

    def kubelet_tls(self, node_name: str) -> ssl.SSLContext | None:
        return None  # the emulator serves pods' logs itself and calls no kubelet

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "emulator",
                    "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
                    "users": [{"name": "tester", "user": {"token": "emulator"}}],
                    "contexts": [
                        {
                            "name": "emulator",
                            "context": {"cluster": "emulator", "user": "tester", "namespace": namespace},
                        }
                    ],
                }
            )
        )
        return path
