"""images/spark/entrypoint.sh, run with bash: the argument `executor` becomes Spark's Kubernetes executor
JVM, configured from the environment Spark gives executor pods (JVM options in SPARK_JAVA_OPT_<n>
order); any other command runs as given. `java` is a stand-in that prints its arguments."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "images" / "spark" / "entrypoint.sh"


def run(args: list[str], env: dict[str, str], tmp_path: Path) -> list[str]:
    java = tmp_path / "java"
    java.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    java.chmod(0o755)
    full = {"PATH": f"{tmp_path}:{os.environ['PATH']}", "HOME": str(tmp_path), **env}
    done = subprocess.run(["bash", str(ENTRYPOINT), *args], env=full, capture_output=True, text=True,
                          timeout=30, check=True)
    return done.stdout.splitlines()


def test_an_executor_pod_starts_the_kubernetes_executor_backend(tmp_path: Path) -> None:
    env = {"SPARK_HOME": "/spark", "SPARK_EXECUTOR_MEMORY": "1g", "SPARK_DRIVER_URL": "spark://d:7078",
           "SPARK_EXECUTOR_ID": "3", "SPARK_EXECUTOR_CORES": "2", "SPARK_APPLICATION_ID": "spark-app-1",
           "SPARK_EXECUTOR_POD_IP": "10.1.2.3", "SPARK_RESOURCE_PROFILE_ID": "0",
           "SPARK_EXECUTOR_POD_NAME": "w-1-exec-3",
           "SPARK_JAVA_OPT_10": "-Dten=10", "SPARK_JAVA_OPT_2": "-Dtwo=2 with space",
           "SPARK_JAVA_OPT_0": "-Dz=0"}
    assert run(["executor"], env, tmp_path) == [
        "-Dz=0", "-Dtwo=2 with space", "-Dten=10", "-Xms1g", "-Xmx1g", "-cp", "/spark/conf:/spark/jars/*",
        "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend",
        "--driver-url", "spark://d:7078", "--executor-id", "3", "--cores", "2", "--app-id", "spark-app-1",
        "--hostname", "10.1.2.3", "--resourceProfileId", "0", "--podName", "w-1-exec-3"]


def test_any_other_command_runs_as_given(tmp_path: Path) -> None:
    assert run(["java", "-version"], {}, tmp_path) == ["-version"]
