"""The operator's RBAC is exactly what it calls (kube.py, leader.py) plus what kopf needs to watch; in
namespaced mode nothing cluster-scoped but kopf's read-only observation; every rule says why."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.charts.chart import CHART_DIR, NAMESPACE, Chart, Rendered

OPERATOR = "lakes-weir"
KINDS = ["laketables", "lakewriters", "tableservices"]
# the contract with operator/lakeoperator/kube.py: (group, resource) -> verbs
OPERATOR_RULES = {
    **{("weir.dev", k): {"get", "list", "watch", "patch"} for k in KINDS},
    **{("weir.dev", f"{k}/status"): {"update"} for k in KINDS},
    ("", "pods"): {"create", "get", "list", "watch", "delete"},
    ("", "events"): {"create"},
    ("", "secrets"): {"get"},
}
CRD_OBSERVATION = {("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"}}
NAMESPACE_OBSERVATION = {("", "namespaces"): {"list", "watch"}}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "Namespace",
                  "PersistentVolume", "StorageClass", "PriorityClass"}


def grants(role: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        assert "resourceNames" not in rule or role["metadata"]["name"].endswith("leader-election")
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                out.setdefault((group, resource), set()).update(rule["verbs"])
    return out


def bound_to_operator(rendered: Rendered, kind: str, name: str, namespace: str | None = None) -> None:
    binding_kind = "RoleBinding" if kind == "Role" else "ClusterRoleBinding"
    bindings = [b for b in rendered.of_kind(binding_kind)
                if b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}
                and b["metadata"].get("namespace") == namespace]
    assert len(bindings) == 1, f"{rendered.values_name}: {kind} {name} is bound {len(bindings)} times"
    assert bindings[0]["subjects"] == [{"kind": "ServiceAccount", "name": OPERATOR, "namespace": NAMESPACE}]


def operator_roles(rendered: Rendered) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["namespace"]: r for r in rendered.of_kind("Role")
            if r["metadata"]["name"] == OPERATOR}


@pytest.mark.parametrize(("values_name", "watched"), [
    ("defaults", [NAMESPACE]),
    ("several-namespaces", ["lake-a", "lake-b", "lake-c"]),
])
def test_namespaced_mode_has_a_role_per_watched_namespace(chart: Chart, values_name: str,
                                                          watched: list[str]) -> None:
    rendered = chart.render(values_name)
    roles = operator_roles(rendered)
    assert sorted(roles) == sorted(watched)
    for namespace, role in roles.items():
        assert grants(role) == OPERATOR_RULES
        bound_to_operator(rendered, "Role", OPERATOR, namespace)


@pytest.mark.parametrize("values_name", ["defaults", "several-namespaces", "no-crds"])
def test_namespaced_mode_grants_nothing_cluster_wide_but_kopfs_read_only_observation(
        chart: Chart, values_name: str) -> None:
    rendered = chart.render(values_name)
    cluster_roles = rendered.of_kind("ClusterRole")
    assert [r["metadata"]["name"] for r in cluster_roles] == [f"{NAMESPACE}-{OPERATOR}-observe"]
    assert grants(cluster_roles[0]) == CRD_OBSERVATION | NAMESPACE_OBSERVATION
    bound_to_operator(rendered, "ClusterRole", f"{NAMESPACE}-{OPERATOR}-observe")


def test_without_kopfs_observation_nothing_cluster_scoped_is_granted(chart: Chart) -> None:
    rendered = chart.render("no-cluster-observation")
    assert not rendered.of_kind("ClusterRole") and not rendered.of_kind("ClusterRoleBinding")
    assert {o["kind"] for o in rendered.objects} & CLUSTER_SCOPED == {"CustomResourceDefinition"}


@pytest.mark.parametrize(("values_name", "observes_namespaces"), [
    ("cluster-wide", False),          # kopf cluster-wide watches every namespace without listing them
    ("cluster-wide-listed", True),    # a list of namespaces: kopf follows which of them exist
])
def test_cluster_wide_mode_has_one_cluster_role(chart: Chart, values_name: str,
                                                observes_namespaces: bool) -> None:
    rendered = chart.render(values_name)
    assert operator_roles(rendered) == {}
    (role,) = rendered.of_kind("ClusterRole")
    expected = OPERATOR_RULES | CRD_OBSERVATION | (NAMESPACE_OBSERVATION if observes_namespaces else {})
    assert grants(role) == expected
    bound_to_operator(rendered, "ClusterRole", role["metadata"]["name"])


@pytest.mark.parametrize(("values_name", "lease"), [
    ("defaults", "weir-operator"), ("cluster-wide", "weir-operator"), ("json-logs", "weir-lease")])
def test_the_lease_is_writable_only_by_name_and_only_in_the_release_namespace(
        chart: Chart, values_name: str, lease: str) -> None:
    rendered = chart.render(values_name)
    leases = [r for r in rendered.of_kind("Role") + rendered.of_kind("ClusterRole")
              if any("leases" in rule["resources"] for rule in r["rules"])]
    assert [(r["kind"], r["metadata"].get("namespace")) for r in leases] == [("Role", NAMESPACE)]
    rules = leases[0]["rules"]
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]} in rules
    assert {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease],
            "verbs": ["get", "update"]} in rules
    assert len(rules) == 2
    bound_to_operator(rendered, "Role", leases[0]["metadata"]["name"], NAMESPACE)


@pytest.mark.parametrize(("values_name", "namespaces"), [
    ("defaults", [NAMESPACE]),
    ("several-namespaces", ["lake-a", "lake-b", "lake-c"]),
    ("cluster-wide", [NAMESPACE]),
    ("cluster-wide-listed", ["lake-a", "lake-b"]),
])
def test_spark_drivers_get_an_account_allowed_to_manage_their_executors_where_they_run(
        chart: Chart, values_name: str, namespaces: list[str]) -> None:
    rendered = chart.render(values_name)
    accounts = [a for a in rendered.of_kind("ServiceAccount") if a["metadata"]["name"] == "weir-spark"]
    assert sorted(a["metadata"]["namespace"] for a in accounts) == sorted(namespaces)
    for namespace in namespaces:
        (role,) = [r for r in rendered.of_kind("Role")
                   if r["metadata"]["name"] == "weir-spark" and r["metadata"]["namespace"] == namespace]
        assert grants(role) == {
            ("", "pods"): {"create", "get", "list", "watch", "delete", "deletecollection"},
            ("", "configmaps"): {"create", "get", "list", "delete", "deletecollection"},
        }
        (binding,) = [b for b in rendered.of_kind("RoleBinding")
                      if b["metadata"]["name"] == "weir-spark" and b["metadata"]["namespace"] == namespace]
        assert binding["roleRef"]["name"] == "weir-spark"
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "weir-spark", "namespace": namespace}]


def test_drivers_manage_claims_only_when_asked_and_pull_with_the_charts_secrets(chart: Chart) -> None:
    rendered = chart.render("json-logs")
    (role,) = [r for r in rendered.of_kind("Role") if r["metadata"]["name"] == "weir-spark"]
    assert grants(role)[("", "persistentvolumeclaims")] == {"create", "get", "list", "delete",
                                                           "deletecollection"}
    account = rendered.one("ServiceAccount", "weir-spark")
    assert account["imagePullSecrets"] == [{"name": "registry"}]
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "registry"}]


def test_every_rule_in_the_templates_says_why() -> None:
    for template in ("rbac.yaml", "driver-rbac.yaml"):
        lines = (CHART_DIR / "templates" / template).read_text().splitlines()
        for number, line in enumerate(lines):
            if re.match(r"\s*- apiGroups:", line):
                above = next(earlier for earlier in reversed(lines[:number])
                             if not earlier.strip().startswith("{{"))
                assert above.strip().startswith("#"), \
                    f"{template}:{number + 1}: a rule without a comment saying why"
