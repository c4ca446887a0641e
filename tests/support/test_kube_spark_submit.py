"""spark-submit in Kubernetes cluster mode submits a driver to the emulator (fabric8, server-side apply)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import require_spark
from tests.support.kube_api import KubeApi

pytestmark = [pytest.mark.k8s, pytest.mark.spark]


def test_spark_submit_creates_the_driver_and_its_dependents_are_collected(
    kube_api: KubeApi, tmp_path: Path
) -> None:
    require_spark()
    spark_submit = shutil.which("spark-submit", path=str(Path(sys.executable).parent))
    assert spark_submit is not None, "pyspark's spark-submit is not next to the test interpreter"
    kubeconfig = kube_api.write_kubeconfig(tmp_path / "kubeconfig")
    # spark-submit finds its Spark through the Python it runs: this interpreter, first on PATH
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    submitted = subprocess.run(
        [
            spark_submit,
            "--master",
            f"k8s://{kube_api.url}",
            "--deploy-mode",
            "cluster",
            "--name",
            "weir-job",
            "--conf",
            "spark.kubernetes.container.image=weir/spark:test",
            "--conf",
            "spark.kubernetes.submission.waitAppCompletion=false",
            "--conf",
            "spark.kubernetes.namespace=default",
            "local:///opt/job.py",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    client = kube_api.client()
    drivers = client.get("/api/v1/namespaces/default/pods", labelSelector="spark-role=driver")["items"]
    assert len(drivers) == 1
    driver = drivers[0]["metadata"]["name"]
    dependents = [
        item
        for plural in ("configmaps", "services")
        for item in client.get(f"/api/v1/namespaces/default/{plural}")["items"]
    ]
    assert dependents and all(item["metadata"]["ownerReferences"][0]["name"] == driver for item in dependents)
    client.delete(f"/api/v1/namespaces/default/pods/{driver}")
    assert client.get("/api/v1/namespaces/default/configmaps")["items"] == []
    assert client.get("/api/v1/namespaces/default/services")["items"] == []
