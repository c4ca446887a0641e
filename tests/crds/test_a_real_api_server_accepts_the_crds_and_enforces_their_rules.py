"""A real kube-apiserver (tests/support/kube_server.py) accepts Weir's CRDs as `kubectl apply --server-side`
sends them, every example applies, and the server itself enforces each rule: every case of the CEL table
(test_cel_rules.py) gets the server's verdict the local evaluator gives, with the rule's message; an enum
refuses an unknown value with the values it supports."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.crds.manifests import CRD_DIR, CRD_FILES, EXAMPLE_FILES, REPO_ROOT
from tests.crds.test_cel_rules import CASES, Case, _rule_named, body
from tests.support.kube_client import KubeClient, KubeClientError, resource_path
from tests.support.kube_server import ControlPlane
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.k8s
WEIR = "weir.dev/v1alpha1"
PLURALS = {"LakeTable": "laketables", "LakeWriter": "lakewriters", "TableService": "tableservices"}
GITOPS = REPO_ROOT / "examples" / "gitops"


@pytest.fixture(scope="module")
def applied(kube_server: ControlPlane, kube_tools: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """`kubectl apply --server-side -f crds/` (once per module); its output. The CRDs are Established."""
    kubeconfig = kube_server.write_kubeconfig(tmp_path_factory.mktemp("crds") / "kubeconfig")
    kubectl = Kubectl(kube_tools / "kubectl", kubeconfig)
    done = kubectl.run("apply", "--server-side", "-f", str(CRD_DIR))
    client = kube_server.client()
    for file in CRD_FILES.values():
        name = yaml.safe_load((CRD_DIR / file).read_text())["metadata"]["name"]
        client.wait_for(resource_path("apiextensions.k8s.io/v1", "customresourcedefinitions", name=name),
                        lambda crd: any(c["type"] == "Established" and c["status"] == "True"
                                        for c in crd.get("status", {}).get("conditions", [])))
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def cases_namespace(kube_server: ControlPlane, applied: str) -> Iterator[str]:
    with kube_server.namespace("cel-cases") as name:
        yield name


def test_kubectl_apply_server_side_of_crds_is_accepted_without_warnings(applied: str) -> None:
    names = [yaml.safe_load((CRD_DIR / f).read_text())["metadata"]["name"] for f in CRD_FILES.values()]
    assert sorted(applied.splitlines()) == sorted(
        f"customresourcedefinition.apiextensions.k8s.io/{n} serverside-applied" for n in names)


def test_every_crd_example_applies(applied: str, real_kubectl: Kubectl) -> None:
    assert EXAMPLE_FILES
    for path in EXAMPLE_FILES:
        done = real_kubectl.run("apply", "--server-side", "-f", str(path))
        assert done.stdout.rstrip().endswith("serverside-applied") and not done.stderr, path


def test_the_gitops_base_and_overlay_apply_after_kustomize(applied: str, real_kubectl: Kubectl,
                                                           kube_server: ControlPlane) -> None:
    base = real_kubectl.run("kustomize", str(GITOPS / "base")).stdout
    done = real_kubectl.run("apply", "--server-side", "-f", "-", input_text=base)
    assert done.stdout.count("serverside-applied") == len(list(yaml.safe_load_all(base))) == 4
    overlay = real_kubectl.run("kustomize", str(GITOPS / "overlays" / "production")).stdout
    namespaces = {doc["metadata"]["namespace"] for doc in yaml.safe_load_all(overlay)}
    assert namespaces == {"lake-production"}
    client = kube_server.client()
    client.create(resource_path("v1", "namespaces"), {"metadata": {"name": "lake-production"}})
    try:
        done = real_kubectl.run("apply", "--server-side", "-f", "-", input_text=overlay)
        assert done.stdout.count("serverside-applied") == 4, done.stdout
    finally:
        client.delete(resource_path("v1", "namespaces", name="lake-production"))


def _verdict(client: KubeClient, case: Case, namespace: str, name: str) -> list[str]:
    """The server's refusal of the case (the messages of its causes; none: accepted). An update case
    creates the old body first (which must be accepted), then replaces it with the new one."""
    path = resource_path(WEIR, PLURALS[case.kind], namespace)
    new = {**case.new, "metadata": {"name": name}}
    try:
        if case.old is None:
            client.create(path, new)
        else:
            created = client.create(path, {**case.old, "metadata": {"name": name}})
            new["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
            client.replace(f"{path}/{name}", new)
    except KubeClientError as error:
        assert error.status == 422, error
        return [cause["message"] for cause in error.body["details"]["causes"]]
    return []


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_server_gives_each_cel_case_its_verdict_with_the_rules_message(
    case: Case, kube_server: ControlPlane, cases_namespace: str
) -> None:
    name = f"c{CASES.index(case):03d}"
    causes = _verdict(kube_server.client(), case, cases_namespace, name)
    expected = sorted(_rule_named(case.kind, part).message for part in case.violates)
    explained = {cause: [m for m in expected if m in cause] for cause in causes}
    unexplained = [cause for cause, found in explained.items() if not found]
    assert (sorted(m for found in explained.values() for m in found), unexplained) == (expected, []), causes


def _refusal(kube_server: ControlPlane, kind: str, namespace: str, name: str, patch: dict[str, Any],
             old: dict[str, Any] | None = None) -> str:
    """Create `old` (or the kind's base body), merge-patch it; the server's whole message."""
    path = resource_path(WEIR, PLURALS[kind], namespace)
    client = kube_server.client()
    client.create(path, {**(old or body(kind)), "metadata": {"name": name}})
    with pytest.raises(KubeClientError) as refused:
        client.patch(f"{path}/{name}", patch)
    assert refused.value.status == 422
    message: str = refused.value.body["message"]
    return message


def test_an_identity_change_is_refused_by_the_server(kube_server: ControlPlane, cases_namespace: str) -> None:
    message = _refusal(kube_server, "LakeTable", cases_namespace, "rekeyed", {"spec": {"recordKey": ["v"]}})
    # the whole message, as `kubectl apply` prints it
    assert message == ('LakeTable.weir.dev "rekeyed" is invalid: spec.recordKey: Invalid value: '
                       + _rule_named("LakeTable", "recordKey is immutable").message)


def test_a_contradictory_option_is_refused_by_the_server(kube_server: ControlPlane,
                                                         cases_namespace: str) -> None:
    message = _refusal(kube_server, "LakeWriter", cases_namespace, "both",
                       {"spec": {"mode": "batch", "trigger": {"availableNow": True}}})
    assert _rule_named("LakeWriter", "trigger is for streaming").message in message


@pytest.mark.parametrize("kind, patch, refusal", [
    ("LakeWriter", {"mode": "sideways"},
     'spec.mode: Unsupported value: "sideways": supported values: "streaming", "batch"'),
    ("LakeTable", {"compression": "brotli"},   # a codec Spark cannot read is not offered
     'spec.compression: Unsupported value: "brotli": supported values: "zstd", "lz4", "snappy", "gzip", '
     '"none"'),
])
def test_a_bad_enum_is_refused_by_the_server_with_the_supported_values(
    kind: str, patch: dict[str, Any], refusal: str, kube_server: ControlPlane, cases_namespace: str
) -> None:
    path = resource_path(WEIR, PLURALS[kind], cases_namespace)
    with pytest.raises(KubeClientError) as refused:
        kube_server.client().create(path, {**body(kind, patch), "metadata": {"name": f"bad-{kind.lower()}"}})
    assert refused.value.status == 422
    assert refusal in refused.value.body["message"]


def test_kubectl_shows_the_servers_refusal(applied: str, real_kubectl: Kubectl, tmp_path: Path) -> None:
    bad = body("TableService", {"type": "compaction", "policy": {"cleanRetained": 5}})
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(json.dumps({**bad, "metadata": {"name": "bad"}}))
    done = real_kubectl.run("apply", "--server-side", "-f", str(manifest), check=False)
    assert done.returncode != 0
    assert _rule_named("TableService", "policy.cleanRetained is for").message in done.stderr
