"""The optional parts: the ServiceMonitor, the bundled ZooKeeper (or an external connect string), the
notes printed after install, and the `helm test` hook."""

from __future__ import annotations

from tests.charts.chart import CHART_DIR, NAMESPACE, Chart


def test_the_service_monitor_scrapes_the_metrics_service(chart: Chart) -> None:
    rendered = chart.render("monitoring")
    monitor = rendered.one("ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prom"
    service = rendered.one("Service", "lakes-weir-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s"}]
    assert chart.render("defaults").of_kind("ServiceMonitor") == []


def test_the_bundled_zookeeper_is_an_ensemble_behind_two_services(chart: Chart) -> None:
    rendered = chart.render("zookeeper")
    statefulset = rendered.one("StatefulSet", "lakes-weir-zookeeper")
    assert statefulset["spec"]["replicas"] == 3
    headless = rendered.one("Service", "lakes-weir-zookeeper-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert statefulset["spec"]["serviceName"] == "lakes-weir-zookeeper-headless"
    client = rendered.one("Service", "lakes-weir-zookeeper")
    assert [p["port"] for p in client["spec"]["ports"]] == [2181]
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "zookeeper:3.9.3"
    env = {e["name"]: e["value"] for e in container["env"]}
    peers = f"lakes-weir-zookeeper-headless.{NAMESPACE}.svc"
    assert env["ZOO_SERVERS"].split() == [
        f"server.{i + 1}=lakes-weir-zookeeper-{i}.{peers}:2888:3888;2181" for i in range(3)]
    assert env["ZOO_STANDALONE_ENABLED"] == "false"
    (init,) = statefulset["spec"]["template"]["spec"]["initContainers"]
    conf = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    # the image's /conf is copied into the writable one the server uses
    assert "/conf/." in init["command"][-1] and conf["conf"] in init["command"][-1]
    assert {m["name"]: m["mountPath"] for m in container["volumeMounts"]}["conf"] == "/conf"
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert client["spec"]["selector"].items() <= statefulset["spec"]["template"]["metadata"]["labels"].items()
    assert not chart.render("defaults").of_kind("StatefulSet")


def test_the_notes_print_what_laketables_should_connect_to(chart: Chart) -> None:
    external = chart.run("install", "lakes", str(CHART_DIR), "--dry-run=client", "--namespace", NAMESPACE,
                         values={"zookeeper": {"connect": "zk-0.zk:2181,zk-1.zk:2181"}})
    bundled = chart.run("install", "lakes", str(CHART_DIR), "--dry-run=client", "--namespace", NAMESPACE,
                        values={"zookeeper": {"enabled": True}})
    assert external.returncode == 0, external.stderr
    assert "spec.lock.zookeeper.connect: zk-0.zk:2181,zk-1.zk:2181" in external.stdout
    assert f"spec.lock.zookeeper.connect: lakes-weir-zookeeper.{NAMESPACE}.svc:2181" in bundled.stdout
    for text in ("kubectl get weir -A", "helm test lakes", "laketable-minimal.yaml"):
        assert text in external.stdout


def test_helm_test_checks_the_metrics_endpoint_with_python(chart: Chart) -> None:
    pod = chart.render("defaults").one("Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == chart.render("defaults").one("Deployment")["spec"]["template"]["spec"][
        "containers"][0]["image"]
    script = container["args"][0]
    assert f"http://lakes-weir-metrics.{NAMESPACE}.svc:9090/metrics" in script
    compile(script, "helm-test", "exec")   # the script is valid Python
