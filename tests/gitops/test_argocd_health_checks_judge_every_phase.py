"""The Argo CD health checks (gitops/argocd/health/weir.dev/<Kind>/health.lua) judge every status the
operator writes as a user expects, run with Lua 5.1 (lupa) as Argo CD runs them (gopher-lua is 5.1); the
argocd-cm rendering holds the same scripts."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from lupa import lua51

from tests.gitops.samples import Sample, all_samples

ROOT = Path(__file__).resolve().parents[2]
ARGOCD = ROOT / "gitops" / "argocd"
KINDS = ("LakeTable", "LakeWriter", "TableService")
HEALTH = {"Healthy", "Progressing", "Degraded", "Suspended", "Missing"}


def script(kind: str) -> str:
    return (ARGOCD / "health" / "weir.dev" / kind / "health.lua").read_text()


def health(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(status, message) as Argo CD gets them: the script runs with the live object as global `obj`."""
    lua = lua51.LuaRuntime()
    lua.globals().obj = lua.table_from(obj, recursive=True)
    hs = lua.execute(script(str(obj["kind"])))
    return str(hs["status"]), str(hs["message"])


@pytest.mark.parametrize("sample", all_samples(), ids=str)
def test_each_phase_has_the_health_a_user_expects(sample: Sample) -> None:
    status, message = health(sample.body)
    assert (status, bool(message)) == (sample.health, True), (sample.name, message, sample.body.get("status"))


@pytest.mark.parametrize("kind", KINDS)
def test_an_object_the_operator_has_not_seen_yet_is_progressing(kind: str) -> None:
    obj = {"apiVersion": "weir.dev/v1alpha1", "kind": kind, "metadata": {"name": "x", "generation": 1}}
    assert health(obj) == ("Progressing", "waiting for the Weir operator to reconcile it")
    assert health({**obj, "status": {}})[0] == "Progressing"


def test_a_status_left_by_an_older_generation_is_progressing_whatever_it_says() -> None:
    for sample in all_samples():
        meta = {**sample.body["metadata"], "generation": 99}
        status, message = health({**sample.body, "metadata": meta})
        assert status in HEALTH
        if "deletionTimestamp" not in meta and status != "Suspended":
            assert (status, message) == ("Progressing", "the operator has not reconciled generation 99 yet")


def _renderer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("render_cm", ARGOCD / "render_cm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_argocd_cm_keys_hold_the_lua_files() -> None:
    render = _renderer()
    committed = (ARGOCD / "argocd-cm-health.yaml").read_text()
    assert committed == render.render(), f"argocd-cm-health.yaml is stale: run {render.REGENERATE}"
    data = yaml.safe_load(committed)["data"]
    assert data == {f"resource.customizations.health.weir.dev_{kind}": script(kind) for kind in KINDS}
