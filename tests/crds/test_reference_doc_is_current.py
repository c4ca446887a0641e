"""docs/crds.md is the rendering of the CRDs: changing a CRD without regenerating the page fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeoperator.dev.crd_docs import REGENERATE, main, render_crd_reference
from tests.crds.cel import rules_of
from tests.crds.manifests import CRD_FILES, REPO_ROOT, crd, crds, schema


def test_docs_crds_md_equals_the_rendering_of_the_crds() -> None:
    committed = (REPO_ROOT / "docs" / "crds.md").read_text()
    assert committed == render_crd_reference(crds()), (
        f"docs/crds.md is out of date with crds/*.yaml; regenerate it from the repository root with "
        f"`PYTHONPATH=operator {REGENERATE}`")


def test_the_page_names_every_field_and_every_rule_message() -> None:
    page = render_crd_reference(crds())
    assert "`spec.concurrency.earlyDetection.strategy`" in page
    assert "`status.attempts.infraFailures`" in page
    for kind in CRD_FILES:
        assert f"## {kind}" in page
        for rule in rules_of(kind, schema(kind)):
            assert rule.message in page


def test_the_rendering_does_not_depend_on_the_order_of_the_files() -> None:
    assert render_crd_reference(crds()[::-1]) == render_crd_reference(crds())


def test_the_command_says_what_to_pass_when_a_directory_has_no_crds(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 2
    assert "pass the directory" in capsys.readouterr().err
    (tmp_path / "lt.yaml").write_text((REPO_ROOT / "crds" / "weir.dev_laketables.yaml").read_text())
    assert main([str(tmp_path)]) == 0
    assert capsys.readouterr().out == render_crd_reference([crd("LakeTable")])
