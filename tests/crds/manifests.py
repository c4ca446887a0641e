"""The CRD files and the example manifests of the repository, loaded once."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from lakeoperator.dev.crd_schema import version_schema

REPO_ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = REPO_ROOT / "crds"
CRD_FILES = {"LakeTable": "weir.dev_laketables.yaml", "LakeWriter": "weir.dev_lakewriters.yaml",
             "TableService": "weir.dev_tableservices.yaml"}
EXAMPLE_FILES = sorted((CRD_DIR / "examples").rglob("*.yaml"))


@cache
def _parsed(kind: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((CRD_DIR / CRD_FILES[kind]).read_text())
    return body


def crd(kind: str) -> dict[str, Any]:
    """A fresh copy of the CRD of `kind` (tests may change it)."""
    return copy.deepcopy(_parsed(kind))


def crds() -> list[dict[str, Any]]:
    return [crd(kind) for kind in CRD_FILES]


def schema(kind: str) -> dict[str, Any]:
    return version_schema(crd(kind))


def example(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(path.read_text())
    return body
