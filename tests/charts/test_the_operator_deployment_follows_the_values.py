"""The operator Deployment: one reconciling replica at a time (Recreate, leader election), its settings
passed as the WEIR_* variables `weir operator` reads, images defaulting to the chart's appVersion."""

from __future__ import annotations

from typing import Any

import pytest
import typer
import yaml

from lakeoperator.main import operator_command
from tests.charts.chart import CHART_DIR, NAMESPACE, VALUES, Chart

APP_VERSION = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text())["appVersion"]


def container(chart: Chart, values_name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    deployment = chart.render(values_name).one("Deployment")
    (operator,) = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, operator


def env(operator: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in operator["env"]}


def operator_env_vars() -> set[str]:
    app = typer.Typer()
    app.command()(operator_command)
    return {p.envvar for p in typer.main.get_command(app).params if isinstance(p.envvar, str)}


def test_defaults(chart: Chart) -> None:
    deployment, operator = container(chart, "defaults")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert operator["image"] == f"ghcr.io/weir-dev/weir-operator:{APP_VERSION}"
    assert operator["command"] == ["weir", "operator"]
    assert env(operator) == {
        "POD_NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "WEIR_IDENTITY": {"fieldRef": {"fieldPath": "metadata.name"}},
        "WEIR_NAMESPACES": NAMESPACE,
        "WEIR_SPARK_IMAGE": f"ghcr.io/weir-dev/weir-spark:{APP_VERSION}",
        "WEIR_JOBS_DIR": "/opt/weir/sparkjobs",
        "WEIR_API_SERVER": "https://kubernetes.default.svc",
        "WEIR_DRIVER_SERVICE_ACCOUNT": "weir-spark",
        "WEIR_WORKERS": "8",
        "WEIR_METRICS_PORT": "9090",
        "WEIR_LIVENESS_PORT": "8080",
        "WEIR_LOG_FORMAT": "plain",
        "WEIR_LEADER_ELECTION": "true",
        "WEIR_LEASE_NAME": "weir-operator",
        "WEIR_LEASE_DURATION": "15",
        "WEIR_LEASE_RENEW": "5",
        "WEIR_SUPERVISE_PERIOD": "1",
        "WEIR_CONFLICT_GRACE": "10",
    }
    probe = operator["livenessProbe"]["httpGet"]
    assert probe["path"] == "/healthz"
    ports = {p["name"]: p["containerPort"] for p in operator["ports"]}
    assert ports == {"metrics": 9090, "healthz": 8080} and probe["port"] == "healthz"
    assert operator["resources"]["requests"] and operator["resources"]["limits"]


@pytest.mark.parametrize("values_name", ["defaults", "json-logs", "cluster-wide-listed"])
def test_every_variable_set_is_an_option_of_weir_operator(chart: Chart, values_name: str) -> None:
    _, operator = container(chart, values_name)
    known = operator_env_vars() | {"POD_NAMESPACE"}   # POD_NAMESPACE: the Lease namespace's default
    assert set(env(operator)) <= known, set(env(operator)) - known


def test_other_values_reach_the_operator(chart: Chart) -> None:
    deployment, operator = container(chart, "json-logs")
    assert deployment["spec"]["replicas"] == 2
    assert operator["image"] == "ghcr.io/weir-dev/weir-operator:9.9.9"
    for key, value in {"WEIR_LOG_FORMAT": "json", "WEIR_WORKERS": "4", "WEIR_SUPERVISE_PERIOD": "0.5",
                       "WEIR_LEASE_NAME": "weir-lease", "WEIR_LEASE_DURATION": "30",
                       "WEIR_LEASE_RENEW": "10"}.items():
        assert env(operator)[key] == value


@pytest.mark.parametrize(("values_name", "namespaces"), [
    ("several-namespaces", "lake-a lake-b lake-c"),
    ("cluster-wide-listed", "lake-a lake-b"),
    ("cluster-wide", None),   # no variable: every namespace
])
def test_watched_namespaces(chart: Chart, values_name: str, namespaces: str | None) -> None:
    _, operator = container(chart, values_name)
    assert env(operator).get("WEIR_NAMESPACES") == namespaces


def test_the_metrics_service_selects_only_the_operator(chart: Chart) -> None:
    rendered = chart.render("defaults")
    service = rendered.one("Service", "lakes-weir-metrics")
    pod_labels = rendered.one("Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "operator"
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 9090, "targetPort": "metrics",
                                         "protocol": "TCP"}]


def test_several_replicas_without_leader_election_are_refused(chart: Chart) -> None:
    result = chart.template({"replicaCount": 2, "leaderElection": {"enabled": False}})
    assert result.returncode != 0 and "leaderElection.enabled" in result.stderr


def test_a_lease_renewed_less_than_three_times_per_duration_is_refused(chart: Chart) -> None:
    """The operator would exit at start (LeaseTerms), a crash loop on a cluster: helm says so first."""
    result = chart.template({"leaderElection": {"renewSeconds": 10}})
    assert result.returncode != 0
    said = ("leaderElection.renewSeconds (10) must be at most a third of "
            "leaderElection.leaseDurationSeconds (15)")
    assert said in result.stderr, result.stderr
    assert chart.template({"leaderElection": {"renewSeconds": 5}}).returncode == 0   # a third: renewed 3x
    assert chart.template({"leaderElection": {"enabled": False, "renewSeconds": 10}}).returncode == 0


@pytest.mark.parametrize("values_name", ["json-logs", "several-namespaces"])
def test_weir_operator_parses_the_variables_into_the_values(chart: Chart, values_name: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _, operator = container(chart, values_name)
    for name, value in env(operator).items():
        if isinstance(value, str):
            monkeypatch.setenv(name, value)
    app = typer.Typer()
    app.command()(operator_command)
    params = typer.main.get_command(app).make_context("weir operator", []).params
    values = VALUES[values_name]
    assert params["namespace"] == values.get("watchNamespaces", [NAMESPACE])
    assert params["log_format"] == values.get("operator", {}).get("logFormat", "plain")
    assert params["workers"] == values.get("operator", {}).get("workers", 8)
    assert params["supervise_period"] == values.get("operator", {}).get("supervisePeriodSeconds", 1)
    lease = values.get("leaderElection", {})
    assert params["leader_election"] is True
    assert (params["lease_name"], params["lease_duration"], params["lease_renew"]) == (
        lease.get("leaseName", "weir-operator"), lease.get("leaseDurationSeconds", 15),
        lease.get("renewSeconds", 5))
    assert params["driver_service_account"] == "weir-spark"
    assert params["image"] == f"ghcr.io/weir-dev/weir-spark:{APP_VERSION}"


def test_with_everything_brought_by_the_user_only_the_operator_and_its_service_are_rendered(
        chart: Chart) -> None:
    rendered = chart.render("bring-your-own")
    assert sorted(o["kind"] for o in rendered.objects) == ["Deployment", "Pod", "Service"]
    deployment, operator = container(chart, "bring-your-own")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "my-operator"
    assert env(operator)["WEIR_DRIVER_SERVICE_ACCOUNT"] == "my-spark"
