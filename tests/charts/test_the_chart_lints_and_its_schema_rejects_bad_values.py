"""`helm lint` (also --strict) passes, and values.schema.json refuses wrong types, unknown keys and
values outside an enum, naming the field."""

from __future__ import annotations

import json

import pytest

from tests.charts.chart import CHART_DIR, Chart


@pytest.mark.parametrize("strict", [False, True])
def test_helm_lint(chart: Chart, strict: bool) -> None:
    result = chart.run("lint", str(CHART_DIR), *(["--strict"] if strict else []))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(("values", "field"), [
    ({"operator": {"workers": "many"}}, "/operator/workers"),
    ({"operator": {"logFormat": "xml"}}, "/operator/logFormat"),
    ({"zookeeper": {"replicas": 2}}, "/zookeeper/replicas"),
    ({"rbac": {"clusterWide": "yes"}}, "/rbac/clusterWide"),
    ({"watchNamespaces": ["Not_A_Namespace"]}, "/watchNamespaces/0"),
    ({"metrics": {"port": 70000}}, "/metrics/port"),
    ({"imagePullSecrets": ["regcred"]}, "/imagePullSecrets/0"),
    ({"zookeeper": {"connect": "zk-0 zk-1"}}, "/zookeeper/connect"),
])
def test_a_bad_value_is_refused_naming_the_field(chart: Chart, values: dict[str, object], field: str) -> None:
    result = chart.template(values)
    assert result.returncode != 0, f"{values} was accepted"
    assert field in result.stderr, result.stderr


@pytest.mark.parametrize(("values", "key"), [
    ({"replicas": 2}, "replicas"),
    ({"operator": {"logLevel": "debug"}}, "logLevel"),
    ({"zookeeper": {"storage": "1Gi"}}, "storage"),
])
def test_an_unknown_key_is_refused_naming_it(chart: Chart, values: dict[str, object], key: str) -> None:
    result = chart.template(values)
    assert result.returncode != 0 and f"'{key}' not allowed" in result.stderr, result.stderr


def test_every_value_is_in_the_schema_and_documented() -> None:
    import yaml

    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    readme = (CHART_DIR / "README.md").read_text()

    def leaves(node: object, prefix: str, schema_node: dict[str, object]) -> list[str]:
        if isinstance(node, dict) and node and schema_node.get("additionalProperties") is False:
            props = schema_node["properties"]
            assert isinstance(props, dict)
            out = []
            for key, value in node.items():
                assert key in props, f"{prefix}{key} is in values.yaml but not in values.schema.json"
                out += leaves(value, f"{prefix}{key}.", props[key])
            return out
        return [prefix.rstrip(".")]

    def documented(path: str) -> bool:   # the value, or an object holding it (`resources`)
        parts = path.split(".")
        return any(f"`{'.'.join(parts[:n])}`" in readme for n in range(1, len(parts) + 1))

    undocumented = [path for path in leaves(values, "", schema) if not documented(path)]
    assert not undocumented, f"add these values to the table in charts/weir/README.md: {undocumented}"


@pytest.mark.parametrize(("setting", "named"), [
    ("operator.logFormat=yaml", "/operator/logFormat"),
    ("operator.workers=many", "/operator/workers"),
    ("leaderElection.enable=false", "'enable' not allowed"),
])
def test_helm_set_is_checked_too(chart: Chart, setting: str, named: str) -> None:
    result = chart.template({}, "--set", setting)
    assert result.returncode != 0 and named in result.stderr, result.stderr
