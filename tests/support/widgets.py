"""A small custom resource for the tests of the test tools (kopf, kubectl): a `Widget` CRD and a widget's
body. Each test names its own API group, so tests sharing the session's API server never meet on the
(cluster-wide) CRD. Its schema keeps whatever spec and status hold, as `x-kubernetes-preserve-unknown-
fields` does on a real API server (which prunes every field a schema does not name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support.kube_client import resource_path

ANY_OBJECT = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def crd(group: str) -> dict[str, Any]:
    """The Widget CustomResourceDefinition of `group` (short name `wd`, a status subresource)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{
                "name": "v1", "served": True, "storage": True, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object",
                                               "properties": {"spec": ANY_OBJECT, "status": ANY_OBJECT}}},
            }],
        },
    }


def crd_file(group: str, directory: Path) -> Path:
    """The CRD of `group` as a YAML file in `directory` (what kubectl applies)."""
    path = directory / f"widgets.{group}.yaml"
    path.write_text(yaml.safe_dump(crd(group)))
    return path


def widgets_path(group: str, namespace: str) -> str:
    return resource_path(f"{group}/v1", "widgets", namespace)


def widget(group: str, name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{group}/v1", "kind": "Widget",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}
