"""The CRD files are valid apiextensions.k8s.io/v1 CustomResourceDefinitions with structural schemas."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from lakeoperator.dev.crd_schema import version_schema
from tests.crds.manifests import CRD_DIR, CRD_FILES, crd
from tests.crds.structural import crd_problems, schema_problems

RULES = "x-kubernetes-validations"
SHORT_NAMES = {"LakeTable": "lt", "LakeWriter": "lw", "TableService": "lts"}


def test_one_file_per_kind_and_nothing_else() -> None:
    assert sorted(p.name for p in CRD_DIR.glob("*.yaml")) == sorted(CRD_FILES.values())


@pytest.mark.parametrize("kind", CRD_FILES)
def test_crd_is_a_valid_definition(kind: str) -> None:
    body = crd(kind)
    assert body["spec"]["names"]["kind"] == kind
    assert crd_problems(body, group="weir.dev", short_name=SHORT_NAMES[kind], category="weir") == []


@pytest.mark.parametrize("kind", CRD_FILES)
def test_spec_and_status_are_declared(kind: str) -> None:
    props = version_schema(crd(kind))["properties"]
    assert set(props) == {"apiVersion", "kind", "metadata", "spec", "status"}


def _spec_node(kind: str, *path: str) -> dict[str, Any]:
    node = version_schema(crd(kind))["properties"]["spec"]
    for p in path:
        node = node["properties"][p]
    return dict(node)


def test_writers_and_services_share_one_spark_block_and_all_kinds_one_conditions_block() -> None:
    assert _spec_node("LakeWriter", "spark") == _spec_node("TableService", "spark")
    status = [version_schema(crd(k))["properties"]["status"] for k in CRD_FILES]
    conditions = [s["properties"]["conditions"] for s in status]
    assert conditions[0] == conditions[1] == conditions[2]


# The checker must catch what the API server refuses, or its silence above means nothing.
BROKEN: dict[str, tuple[str, Callable[[dict[str, Any]], Any]]] = {
    "an untyped node": ("location", lambda n: n.pop("type")),
    "a node without a description": ("buckets", lambda n: n.pop("description")),
    "properties with additionalProperties": ("", lambda n: n.update(additionalProperties={"type": "string"})),
    "a default that breaks its own schema": ("buckets", lambda n: n.update(default=0)),
    "a default that fails a rule unless its nested defaults apply": ("lock", lambda n: n.update(default={})),
    "a transition rule under an atomic list": (
        "recordKey.items", lambda n: n.update({RULES: [{"rule": "self == oldSelf", "message": "m"}]})),
    "an unbounded string in spec": ("location", lambda n: n.pop("maxLength")),
    "a rule that does not compile": (
        "", lambda n: n[RULES].append({"rule": "self.location ==", "message": "m"})),
    "a rule calling what Kubernetes lacks": (
        "", lambda n: n[RULES].append({"rule": "self.location.sha256() != ''", "message": "m"})),
    "a list map keyed by an undeclared field": (
        "schema", lambda n: n.update({"x-kubernetes-list-map-keys": ["nope"]})),
    "a free-form node": ("storage", lambda n: n.update({"x-kubernetes-preserve-unknown-fields": True})),
}


@pytest.mark.parametrize("what", BROKEN)
def test_the_checker_refuses(what: str) -> None:
    path, breaker = BROKEN[what]
    schema = copy.deepcopy(version_schema(crd("LakeTable")))
    node = schema["properties"]["spec"]
    for part in filter(None, path.split(".")):
        node = node[part] if part == "items" else node["properties"][part]
    assert schema_problems(schema) == []
    breaker(node)
    assert schema_problems(schema) != []
