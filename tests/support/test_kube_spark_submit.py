"""spark-submit in Kubernetes cluster mode submits a driver to the real API server (fabric8 with a
ServiceAccount token, server-side apply); deleting the driver pod has the controller-manager's
garbage collector remove what it owns (its ConfigMap and Service)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.fixtures import require_spark
from tests.support.kube_client import resource_path
from tests.support.kube_server import ControlPlane

pytestmark = [pytest.mark.k8s, pytest.mark.spark]


def test_spark_submit_creates_the_driver_and_its_dependents_are_collected(
    kube_server: ControlPlane, kube_namespace: str, tmp_path: Path
) -> None:
    require_spark()
    spark_submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent))
    assert spark_submit is not None, "pyspark's spark-submit is not next to the test interpreter"
    kubeconfig = kube_server.write_kubeconfig(tmp_path / "kubeconfig", namespace=kube_namespace,
                                              token=kube_server.namespace_admin_token(kube_namespace))
    # spark-submit finds its Spark through the Python it runs: this interpreter, first on PATH
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    submitted = subprocess.run(
        [
            spark_submit,
            "--master",
            f"k8s://{kube_server.url}",
            "--deploy-mode",
            "cluster",
            "--name",
            "weir-job",
            "--conf",
            "spark.kubernetes.container.image=weir/spark:test",
            "--conf",
            "spark.kubernetes.submission.waitAppCompletion=false",
            "--conf",
            f"spark.kubernetes.namespace={kube_namespace}",
            "local:///opt/job.py",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    client = kube_server.client()
    pods = resource_path("v1", "pods", kube_namespace)
    drivers = client.get(pods, labelSelector="spark-role=driver")["items"]
    assert len(drivers) == 1
    driver = drivers[0]["metadata"]["name"]

    def dependents() -> list[str]:
        return [f"{plural}/{item['metadata']['name']}"
                for plural in ("configmaps", "services")
                for item in client.get(resource_path("v1", plural, kube_namespace))["items"]
                if any(o["name"] == driver for o in item["metadata"].get("ownerReferences", []))]

    assert dependents(), "spark-submit made no ConfigMap or Service owned by the driver"
    client.delete(f"{pods}/{driver}")
    deadline = time.monotonic() + 30
    while dependents():
        assert time.monotonic() < deadline, f"not garbage-collected: {dependents()}"
        time.sleep(0.2)
