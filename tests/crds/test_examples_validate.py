"""Every example manifest is valid against its kind's schema, before and after defaulting."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeoperator.dev.crd_schema import apply_defaults, validation_errors
from tests.crds.cel import evaluate, violations
from tests.crds.manifests import CRD_DIR, EXAMPLE_FILES, example, schema


def _id(path: Path) -> str:
    return str(path.relative_to(CRD_DIR / "examples"))


def test_there_is_a_minimal_and_a_full_example_per_kind_and_a_local_set() -> None:
    names = {_id(p) for p in EXAMPLE_FILES}
    for kind in ("laketable", "lakewriter", "tableservice"):
        assert {f"{kind}-minimal.yaml", f"{kind}-full.yaml"} <= names
    local = [example(p)["kind"] for p in EXAMPLE_FILES if _id(p).startswith("local/")]
    assert sorted(local) == ["LakeTable", "LakeWriter", "LakeWriter", "TableService"]


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=_id)
def test_example_validates_against_its_schema(path: Path) -> None:
    body = example(path)
    assert body["apiVersion"] == "weir.dev/v1alpha1"
    s = schema(body["kind"])
    assert validation_errors(s, body) == []
    assert validation_errors(s, apply_defaults(s, body)) == []


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=_id)
def test_example_passes_every_cel_rule_on_create_and_on_an_unchanged_update(path: Path) -> None:
    body = example(path)
    s = schema(body["kind"])
    assert violations(evaluate(body["kind"], s, body)) == []
    assert violations(evaluate(body["kind"], s, body, old=body)) == []


def test_local_examples_use_local_spark_and_relative_paths() -> None:
    for path in EXAMPLE_FILES:
        if not _id(path).startswith("local/"):
            continue
        body = example(path)
        spec = body["spec"]
        if body["kind"] == "LakeTable":
            assert not Path(spec["location"]).is_absolute() and "://" not in spec["location"]
        else:
            assert spec["spark"]["mode"] == "local"
        if body["kind"] == "LakeWriter":
            assert not Path(spec["source"]["path"]).is_absolute() and "://" not in spec["source"]["path"]
