"""Every built-in object the chart renders, for every values set, validates against the Kubernetes
1.27 (the chart's kubeVersion floor) and latest OpenAPI schemas (kubernetes-validate, strict: no unknown
fields). Objects of CRD-defined kinds (the Prometheus Operator's ServiceMonitor) have no schema there and
are skipped; the CRDs themselves are checked as CustomResourceDefinitions."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from tests.charts.chart import VALUES, Chart

CRD_DEFINED = {("monitoring.coreos.com/v1", "ServiceMonitor")}
VERSIONS = ["1.27.0", kubernetes_validate.latest_version()]
_valid: set[str] = set()   # objects already validated (most values sets render the same CRDs)


@pytest.mark.parametrize("values_name", sorted(VALUES))
def test_every_built_in_object_is_valid(chart: Chart, values_name: str) -> None:
    checked = 0
    for obj in chart.render(values_name).objects:
        if (obj["apiVersion"], obj["kind"]) in CRD_DEFINED:
            continue
        checked += 1
        key = json.dumps(obj, sort_keys=True)
        if key in _valid:
            continue
        for version in VERSIONS:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as error:
                pytest.fail(f"{values_name}: {obj['kind']} {obj['metadata']['name']} is not valid "
                            f"Kubernetes {version}: {error.message} at {list(error.path)}")
        _valid.add(key)
    assert checked
