"""`spark.mode: kubernetes`: a real Spark driver, started exactly as the driver pod the operator builds
says (spark-submit, client mode, the operator's --conf), asks the real Kubernetes API server for its
executor pods — with the spec's image and service account, the table's labels, an owner reference to
the driver pod (so they go when it goes) and the storage Secret by reference. The executors need not
run: the test stops the driver once they are requested."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lakeoperator.builders.driver_pod import PodSettings, build_writer_pod
from lakeoperator.launch.local import expand
from lakeoperator.plan.writer import SUBMISSION_LABEL, submission_id
from lakeoperator.reconcile import reconcile_table
from lakeoperator.specs import ObjectRef, parse_lake_table, parse_lake_writer
from tests.support.fixtures import require_spark
from tests.support.kube_client import resource_path
from tests.support.kube_server import ControlPlane
from tests.support.operator import CRDS, weir_path

pytestmark = [pytest.mark.k8s, pytest.mark.spark]
ROOT = Path(__file__).resolve().parents[2]


def test_executors_are_requested_with_the_operators_settings(kube_server: ControlPlane, kube_namespace: str,
                                                             tmp_path: Path) -> None:
    require_spark()
    ns, client = kube_namespace, kube_server.client()
    # the server admits a pod only with a ServiceAccount that exists (the spec's, for driver and executors)
    client.create(resource_path("v1", "serviceaccounts", ns), {"metadata": {"name": "weir-spark"}})
    table = parse_lake_table({"metadata": {"name": "events", "namespace": ns}, "spec": {
        "location": str(tmp_path / "events"), "recordKey": ["id"],
        "schema": [{"name": "id", "type": "int64"}, {"name": "v", "type": "string"}],
        "storage": {"secretRef": {"name": "lake-creds", "key": "options.json"}}}})
    writer_body = {"metadata": {"name": "loader", "namespace": ns, "uid": "w-uid", "generation": 1},
                   "spec": {"tableRef": {"name": "events"}, "mode": "batch",
                            "source": {"path": str(tmp_path)},
                            "spark": {"mode": "kubernetes", "image": "registry/weir-spark:9",
                                      "serviceAccountName": "weir-spark",
                                      "executor": {"instances": 2, "cores": 1, "memory": "512m"},
                                      "driver": {"memory": "512m"}}}}
    # the pod's owner must exist: the controller-manager's garbage collector deletes a pod whose owner
    # reference names an object it cannot find (it did so mid-test once the CRDs were installed)
    kube_server.apply_crds(*CRDS)
    stored = client.create(weir_path("LakeWriter", namespace=ns),
                           {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter",
                            "metadata": {"name": "loader"}, "spec": writer_body["spec"]})
    writer_body["metadata"]["uid"] = stored["metadata"]["uid"]
    owner = ObjectRef.from_body(writer_body)
    reconcile_table({"metadata": {"name": "events", "namespace": ns, "uid": "t", "generation": 1},
                     "spec": {"location": table.location, "recordKey": ["id"],
                              "schema": [{"name": "id", "type": "int64"}, {"name": "v", "type": "string"}]}},
                    datetime.now(UTC))  # the job opens the table before Spark starts
    submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent))
    assert submit is not None
    settings = PodSettings(api_server=kube_server.url, jobs_dir=str(ROOT / "sparkjobs"), spark_submit=submit)
    sid = submission_id(owner, 1)
    pod = build_writer_pod(owner, parse_lake_writer(writer_body), table, sid, settings)
    created = client.create(resource_path("v1", "pods", ns), pod)   # as the operator would

    container = pod["spec"]["containers"][0]
    argv = [expand(a, {"WEIR_POD_IP": "127.0.0.1"}) for a in [*container["command"], *container["args"]]]
    kubeconfig = kube_server.write_kubeconfig(tmp_path / "kubeconfig", namespace=ns,
                                              token=kube_server.namespace_admin_token(ns))
    env = {**os.environ, "KUBECONFIG": str(kubeconfig),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}",
           "WEIR_STORAGE_OPTIONS": "{}"}   # the storage Secret's value, as the kubelet sets it in the pod
    log = open(tmp_path / "driver.log", "wb")  # noqa: SIM115 - closed after the driver is stopped
    driver = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        deadline, executors = time.monotonic() + 120, []
        while time.monotonic() < deadline and len(executors) < 2 and driver.poll() is None:
            executors = client.get(resource_path("v1", "pods", ns),
                                   labelSelector="spark-role=executor")["items"]
            time.sleep(0.3)
        assert len(executors) == 2, why_not(tmp_path / "driver.log")
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
        log.close()
    for e in executors:
        spec, meta = e["spec"], e["metadata"]
        assert spec["containers"][0]["image"] == "registry/weir-spark:9"
        assert spec.get("serviceAccountName") == "weir-spark" or spec.get("serviceAccount") == "weir-spark"
        assert meta["labels"]["weir.dev/table"] == "events" and meta["labels"]["weir.dev/writer"] == "loader"
        assert meta["labels"][SUBMISSION_LABEL] == sid
        owners = meta["ownerReferences"]
        assert owners[0]["kind"] == "Pod" and owners[0]["name"] == sid
        assert owners[0]["uid"] == created["metadata"]["uid"]
        secret_env = [v for v in spec["containers"][0].get("env", []) if v["name"] == "WEIR_STORAGE_OPTIONS"]
        assert secret_env and secret_env[0]["valueFrom"]["secretKeyRef"] == {"name": "lake-creds",
                                                                             "key": "options.json"}


def why_not(driver_log: Path) -> str:
    """The driver log's errors first (a failed SparkContext ends in a long stack trace), then its end."""
    lines = driver_log.read_text(errors="replace").splitlines()
    errors = [line for line in lines if "ERROR" in line or "Exception:" in line][:20]
    return "\n".join([*errors, "...", *lines[-30:]])
