"""`helm install` of charts/weir on a real API server, namespaced and cluster-wide, then the operator run
as the installed Deployment says, as the chart's ServiceAccount (a TokenRequest token, never the admin):
its RBAC is enough for everything the operator does — a table created, two writers of one file group
whose younger (onConflict Abort) is aborted while the older succeeds, a table service run on the
commit, a second replica that stands by and takes the Lease over when the leader dies — and the operator
log has no refused call; what the chart does not grant is refused by the server (another namespace's
Secrets and pods, writing Secrets, another Lease).

The cluster has a control plane of its own (the install owns the CRDs and, cluster-wide, the operator
watches every namespace); driver pods run as processes (the process kubelet) with local Spark.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.charts.chart import Chart
from tests.charts.release import Release, installed
from tests.lakeoperator.kube.manifests import held_writer, reached, table, write_input
from tests.support.fixtures import require_controlplane, require_spark
from tests.support.kube_client import KubeClient, KubeClientError, resource_path
from tests.support.kube_server import ControlPlane
from tests.support.kubelet import ProcessKubelet
from tests.support.operator import ROOT, Cluster, OperatorProcess, pod_environment, wait_until
from tests.support.scenario_checks import check_aborted_on_conflict

pytestmark = [pytest.mark.k8s, pytest.mark.spark]
FAST = {"operator": {"workers": 4, "supervisePeriodSeconds": 0.5, "conflictGraceSeconds": 3},
        "leaderElection": {"leaseDurationSeconds": 3, "renewSeconds": 1}}


def compaction() -> dict[str, Any]:
    """A compaction of `orders` after each delta commit."""
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "TableService", "metadata": {"name": "orders-compact"},
            "spec": {"tableRef": {"name": "orders"}, "type": "compaction",
                     "trigger": {"afterDeltaCommits": 1},
                     "spark": {"mode": "local", "localCores": 1, "driver": {"memory": "512m"}}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    require_controlplane()
    with ControlPlane(tmp_path_factory.mktemp("chart-controlplane")) as control_plane:
        yield control_plane


def refused(call: Any) -> str:
    """The message of the 403 the server answers `call()` with."""
    with pytest.raises(KubeClientError) as refusal:
        call()
    assert refusal.value.status == 403, refusal.value
    return str(refusal.value.body["message"])


def holder(client: KubeClient, release: Release) -> str | None:
    path = resource_path("coordination.k8s.io/v1", "leases", release.namespace, "weir-operator")
    try:
        return str(client.get(path)["spec"]["holderIdentity"])
    except KubeClientError:
        return None


def run_the_operators_work(release: Release, lake: str, work: Path, *, conflict: bool) -> None:
    """Two replicas as the chart's ServiceAccount; the scenario of the module docstring in `lake` (with
    `conflict` False, one writer that runs alone)."""
    server, admin = release.server, release.server.client()
    token = release.operator_token()
    with ProcessKubelet(server, work / "pod-logs", cwd=work, environment=pod_environment(),
                        python_path=[ROOT, ROOT / "operator"], namespace=lake) as kubelet:
        a = release.operator(work / "a", "weir-a", token).start()
        b: OperatorProcess | None = None
        try:
            wait_until(lambda: holder(admin, release) == "weir-a", timeout=30)
            b = release.operator(work / "b", "weir-b", token).start()
            cluster = Cluster(server, lake, admin, kubelet, a, work)
            cluster.apply(table(work, tableType="merge_on_read"))
            cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=60)
            write_input(work, "older", range(10), ts=1)
            older, older_pause = held_writer(cluster, "older", "older")
            cluster.apply(older)
            wait_until(lambda: reached(older_pause), timeout=180, show=lambda: a.log()[-3000:])
            if conflict:
                write_input(work, "younger", range(5, 15), ts=2)
                younger, _ = held_writer(cluster, "younger", "younger",
                                         restartPolicy={"onConflict": "Abort"})
                cluster.apply(younger)
                aborted = cluster.wait_status("LakeWriter", "younger", lambda s: s.get("phase") == "Aborted",
                                              timeout=180)
                (older_instant,) = reached(older_pause)
                check_aborted_on_conflict(aborted["status"], older_instant)
            cluster.apply(compaction())
            (older_pause / "hold").unlink()
            done = cluster.wait_status("LakeWriter", "older", lambda s: s.get("phase") == "Succeeded",
                                       timeout=180)
            assert done["status"]["attempts"]["total"] == 1
            assert (done["status"].get("lastConflict") or {}).get("role") == ("Won" if conflict else None)
            cluster.wait_status("TableService", "orders-compact",
                                lambda s: (s.get("lastRun") or {}).get("outcome") == "success", timeout=180)
            assert "Submitting" not in b.log()   # the standby did nothing meanwhile

            a.kill()   # the leader dies; the standby takes the Lease over and reconciles what comes
            wait_until(lambda: holder(admin, release) == "weir-b", timeout=60,
                       show=lambda: f"holder {holder(admin, release)}; the standby's log:\n{b.log()[-4000:]}")
            cluster.operator = b
            cluster.apply(table(work, name="later"))
            cluster.wait_status("LakeTable", "later", lambda s: s.get("phase") == "Ready", timeout=60)
        finally:
            if b is not None:
                b.stop()
            a.stop()
    for replica in (a, b):
        assert replica is not None
        log = replica.log()
        assert "Traceback" not in log and "Forbidden" not in log and " 403" not in log, log[-4000:]


def test_namespaced_the_operator_needs_no_more_than_the_charts_roles(server: ControlPlane, chart: Chart,
                                                                      tmp_path: Path) -> None:
    require_spark()
    lake, other = server.create_namespace("lake"), server.create_namespace("elsewhere")
    with installed(server, chart.helm, tmp_path / "helm", {**FAST, "watchNamespaces": [lake]}) as release:
        run_the_operators_work(release, lake, tmp_path / "run", conflict=True)
        operator = server.client(token=release.operator_token())
        admin = server.client()
        admin.create(resource_path("v1", "secrets", other),
                     {"metadata": {"name": "not-yours"}, "stringData": {"k": "v"}})
        user = f"system:serviceaccount:{release.namespace}:{release.service_account()}"
        assert f'User "{user}" cannot get resource "secrets" in API group "" in the namespace "{other}"' in \
            refused(lambda: operator.get(resource_path("v1", "secrets", other, "not-yours")))
        refused(lambda: operator.get(resource_path("v1", "pods", other)))
        refused(lambda: operator.create(resource_path("v1", "secrets", lake), {"metadata": {"name": "x"}}))
        refused(lambda: operator.get(resource_path("v1", "secrets", lake)))   # get by name only, no list


def test_cluster_wide_the_operator_needs_no_more_than_the_charts_cluster_role(
        server: ControlPlane, chart: Chart, tmp_path: Path) -> None:
    """Every namespace is watched (the ClusterRole's rules are the namespaced Roles' rules, one template:
    the conflict is left to the namespaced test); still no Secret is written or listed, no Lease but
    its own updated."""
    require_spark()
    lake = server.create_namespace("lake")
    values = {**FAST, "rbac": {"clusterWide": True}, "sparkDriver": {"namespaces": [lake]}}
    with installed(server, chart.helm, tmp_path / "helm", values) as release:
        run_the_operators_work(release, lake, tmp_path / "run", conflict=False)
        operator = server.client(token=release.operator_token())
        refused(lambda: operator.get(resource_path("v1", "secrets", "kube-system")))
        refused(lambda: operator.create(resource_path("v1", "secrets", lake), {"metadata": {"name": "x"}}))
        refused(lambda: operator.delete(resource_path("v1", "namespaces", name=lake)))
        leases = resource_path("coordination.k8s.io/v1", "leases", release.namespace)
        server.client().create(leases, {"metadata": {"name": "someone-elses"},
                                        "spec": {"holderIdentity": "them"}})
        refused(lambda: operator.replace(f"{leases}/someone-elses", {
            "metadata": {"name": "someone-elses"}, "spec": {"holderIdentity": "weir-a"}}))
