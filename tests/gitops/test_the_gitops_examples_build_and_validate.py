"""examples/gitops: every overlay builds with kubectl kustomize (the pinned wheel's kubectl), and every Weir
object it yields is valid against its CRD (schema and CEL rules, as the API server would check) and
parses with the operator's spec parsers into a driver pod; the Argo CD Application and the Flux
Kustomization point at an overlay that exists, and Flux's health expressions judge every sampled status
as kstatus does (and an object without a status as in progress)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml

from lakeoperator.builders.driver_pod import build_service_pod, build_writer_pod
from lakeoperator.dev.crd_schema import apply_defaults, validation_errors
from lakeoperator.specs import ObjectRef, parse_lake_table, parse_lake_writer, parse_table_service
from tests.crds.cel import evaluate, violations
from tests.crds.manifests import schema
from tests.gitops.samples import Sample, all_samples

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "gitops"
OVERLAYS = sorted(p.parent for p in (EXAMPLES / "overlays").glob("*/kustomization.yaml"))
KIND_OVERLAY = ROOT / "tests" / "e2e" / "overlay"   # what the kind suite applies: checked here, where it runs
PARSERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "LakeTable": parse_lake_table, "LakeWriter": parse_lake_writer, "TableService": parse_table_service}


def kustomize(kube_tools: Path, directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run([str(kube_tools / "kubectl"), "kustomize", str(directory)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert not done.stderr, done.stderr      # no deprecation warnings either
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.fixture(scope="module")
def builds(kube_tools: Path) -> dict[str, list[dict[str, Any]]]:
    """Every overlay's objects, and the base's, by directory (relative to examples/gitops; the kind
    suite's overlay as "e2e")."""
    built = {str(d.relative_to(EXAMPLES)): kustomize(kube_tools, d) for d in [EXAMPLES / "base", *OVERLAYS]}
    return built | {"e2e": kustomize(kube_tools, KIND_OVERLAY)}


def weir_objects(builds: dict[str, list[dict[str, Any]]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, objects in builds.items():
        for obj in objects:
            yield name, obj


def test_there_is_a_namespace_free_base_and_a_production_overlay(
        builds: dict[str, list[dict[str, Any]]]) -> None:
    assert "overlays/production" in builds
    assert all("namespace" not in o["metadata"] for o in builds["base"])
    for name, objects in builds.items():
        kinds = sorted((o["kind"], o["spec"].get("mode") or o["spec"].get("type")) for o in objects)
        assert kinds == [("LakeTable", None), ("LakeWriter", "batch"), ("LakeWriter", "streaming"),
                         ("TableService", "compaction")], name
        if name != "base":
            assert {o["metadata"].get("namespace") for o in objects} not in ({None}, set()), name


def test_every_object_is_what_the_api_server_accepts(builds: dict[str, list[dict[str, Any]]]) -> None:
    for name, obj in weir_objects(builds):
        assert obj["apiVersion"] == "weir.dev/v1alpha1", name
        s = schema(obj["kind"])
        where = f"{name}: {obj['kind']} {obj['metadata']['name']}"
        assert validation_errors(s, obj) == [], where
        assert validation_errors(s, apply_defaults(s, obj)) == [], where
        assert violations(evaluate(obj["kind"], s, obj)) == [], where


def test_every_object_parses_into_a_driver_pod(builds: dict[str, list[dict[str, Any]]]) -> None:
    for name, objects in builds.items():
        specs = {(o["kind"], o["metadata"]["name"]): PARSERS[o["kind"]](apply_defaults(schema(o["kind"]), o))
                 for o in objects}
        tables = {n: spec for (kind, n), spec in specs.items() if kind == "LakeTable"}
        for (kind, n), spec in specs.items():
            if kind == "LakeTable":
                continue
            assert spec.table_ref.name in tables, f"{name}: {kind} {n} names no LakeTable of this build"
            owner = ObjectRef("lake", n, f"uid-{n}", 1)
            build = build_writer_pod if kind == "LakeWriter" else build_service_pod
            pod = build(owner, spec, tables[spec.table_ref.name], f"{n}-1")
            assert pod["spec"]["containers"][0]["args"][-1], f"{name}: {kind} {n} builds no job arguments"


def test_the_argocd_application_syncs_the_production_overlay_automatically(
        builds: dict[str, list[dict[str, Any]]]) -> None:
    app = yaml.safe_load((EXAMPLES / "argocd" / "application.yaml").read_text())
    assert (app["apiVersion"], app["kind"]) == ("argoproj.io/v1alpha1", "Application")
    source, sync = app["spec"]["source"], app["spec"]["syncPolicy"]
    assert source["path"] == "examples/gitops/overlays/production"
    assert (ROOT / source["path"] / "kustomization.yaml").exists()
    assert sync["automated"] == {"prune": True, "selfHeal": True}
    namespaces = {o["metadata"]["namespace"] for o in builds["overlays/production"]}
    assert namespaces == {app["spec"]["destination"]["namespace"]}


def flux_kustomization() -> dict[str, Any]:
    docs = list(yaml.safe_load_all((EXAMPLES / "flux" / "kustomization.yaml").read_text()))
    ks: dict[str, Any] = next(d for d in docs if d["kind"] == "Kustomization")
    return ks


def test_the_flux_kustomization_applies_the_overlay_and_waits_for_health() -> None:
    ks = flux_kustomization()
    assert ks["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert ks["spec"]["path"] == "./examples/gitops/overlays/production"
    assert ks["spec"]["wait"] is True and ks["spec"]["prune"] is True
    assert sorted(e["kind"] for e in ks["spec"]["healthCheckExprs"]) == sorted(PARSERS)


@cache
def program(expression: str) -> celpy.Runner:
    env = celpy.Environment()
    return env.program(env.compile(expression))


def flux_health(obj: Mapping[str, Any]) -> str:
    """What Flux concludes from the Kustomization's healthCheckExprs for `obj`: inProgress, then failed,
    then current; none true, or a field missing (an evaluation error), is in progress."""
    check = next(e for e in flux_kustomization()["spec"]["healthCheckExprs"] if e["kind"] == obj["kind"])
    activation = {k: celpy.json_to_cel(v) for k, v in obj.items()}
    for key, status in (("inProgress", "InProgress"), ("failed", "Failed"), ("current", "Current")):
        try:
            if bool(program(check[key]).evaluate(activation)):
                return status
        except celpy.CELEvalError:
            return "InProgress"
    return "InProgress"


LIVE = [s for s in all_samples() if "deletionTimestamp" not in s.body["metadata"]]


@pytest.mark.parametrize("sample", LIVE, ids=str)
def test_fluxs_health_expressions_agree_with_kstatus(sample: Sample) -> None:
    assert flux_health(sample.body) == sample.kstatus


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_fluxs_health_expressions_wait_for_the_first_status(kind: str) -> None:
    assert flux_health({"apiVersion": "weir.dev/v1alpha1", "kind": kind, "metadata": {"generation": 1}}) \
        == "InProgress"
