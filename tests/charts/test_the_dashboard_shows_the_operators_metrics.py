"""The Grafana dashboard's PromQL names only series the operator exports, and shows every metric it
exports. The exported names come from lakeoperator.metrics' own registry, not from a list here."""

from __future__ import annotations

import json
import re
from typing import Any

from lakeoperator.metrics import OperatorMetrics
from tests.charts.chart import CHART_DIR, Chart

# the series a family of each type exposes (Prometheus text format, prometheus_client's naming)
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",),
            "summary": ("", "_sum", "_count"), "info": ("_info",)}
WEIR_NAME = re.compile(r"\bweir_[a-z0-9_]*[a-z0-9]\b")


def exported() -> dict[str, str]:
    """series name -> the metric family it belongs to."""
    return {family.name + suffix: family.name for family in OperatorMetrics().registry.collect()
            for suffix in SUFFIXES[family.type]}


def queries(dashboard: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return exprs


def test_every_query_names_exported_series_and_every_metric_is_shown() -> None:
    dashboard = json.loads((CHART_DIR / "files" / "dashboard.json").read_text())
    series = exported()
    used = {name for expr in queries(dashboard) for name in WEIR_NAME.findall(expr)}
    unknown = used - set(series)
    assert not unknown, f"the dashboard queries series the operator does not export: {sorted(unknown)}"
    not_shown = set(series.values()) - {series[name] for name in used}
    assert not not_shown, f"add a panel for {sorted(not_shown)} (operator/lakeoperator/metrics.py)"


def test_the_configmap_carries_the_dashboard_for_grafanas_sidecar(chart: Chart) -> None:
    rendered = chart.render("monitoring")
    config_map = rendered.one("ConfigMap", "lakes-weir-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["weir-operator.json"])
    assert dashboard == json.loads((CHART_DIR / "files" / "dashboard.json").read_text())
    assert all(panel["targets"] for panel in dashboard["panels"])
    assert chart.render("defaults").of_kind("ConfigMap") == []
