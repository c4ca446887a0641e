"""The chart's CRDs are the repository's crds/ byte for byte, installed only with crds.create, and kept
on uninstall (helm.sh/resource-policy: keep) so deleting the release never deletes a table resource."""

from __future__ import annotations

import yaml

from tests.charts.chart import CHART_DIR, REPO_ROOT, Chart


def test_the_copies_are_byte_equal_to_crds() -> None:
    ours = {p.name: p.read_bytes() for p in (CHART_DIR / "files" / "crds").glob("*.yaml")}
    theirs = {p.name: p.read_bytes() for p in (REPO_ROOT / "crds").glob("weir.dev_*.yaml")}
    assert sorted(ours) == sorted(theirs), "charts/weir/files/crds/ must hold exactly crds/weir.dev_*.yaml"
    stale = [name for name in ours if ours[name] != theirs[name]]
    assert not stale, f"{stale} differ from crds/: run `make crds` (copies them into the chart)"


def test_rendered_crds_are_the_files_with_the_keep_annotation(chart: Chart) -> None:
    crds = chart.render("defaults").of_kind("CustomResourceDefinition")
    rendered = {c["metadata"]["name"]: c for c in crds}
    for path in sorted((REPO_ROOT / "crds").glob("weir.dev_*.yaml")):
        expected = yaml.safe_load(path.read_text())
        expected["metadata"]["annotations"] = {"helm.sh/resource-policy": "keep"}
        assert rendered.pop(expected["metadata"]["name"]) == expected
    assert not rendered


def test_crds_create_false_installs_none(chart: Chart) -> None:
    assert chart.render("no-crds").of_kind("CustomResourceDefinition") == []
    assert chart.render("no-crds").one("Deployment")
