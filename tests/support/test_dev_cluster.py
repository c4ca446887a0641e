"""`python -m tests.support.dev_cluster`, the tests' Kubernetes by hand: it starts the real control plane
with Weir's CRDs, the process kubelet and the operator, prints the KUBECONFIG to use, serves kubectl
(a LakeTable applied with the pinned kubectl is made Ready by the operator, on disk), and stops
everything it started at SIGINT."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.fixtures import require_controlplane
from tests.support.kubectl import extract_tools

ROOT = Path(__file__).resolve().parents[2]


def test_the_dev_cluster_runs_a_lake_table_and_stops_at_ctrl_c(tmp_path: Path) -> None:
    require_controlplane()
    kubectl = extract_tools() / "kubectl"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator")]),
           "HOME": str(tmp_path)}
    command = [sys.executable, "-m", "tests.support.dev_cluster", "--dir", str(tmp_path / "dev"),
               "--operator"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("ready"):
                break
        said = "".join(lines)
        assert proc.poll() is None, said
        kubeconfig = next(x.split("=", 1)[1].strip() for x in lines if x.startswith("export KUBECONFIG="))
        table = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable", "metadata": {"name": "orders"},
                 "spec": {"location": str(tmp_path / "lake" / "orders"), "recordKey": ["id"],
                          "schema": [{"name": "id", "type": "int64", "nullable": False}]}}
        run = {**env, "KUBECONFIG": kubeconfig}
        subprocess.run([str(kubectl), "apply", "-f", "-"], input=json.dumps(table), text=True, env=run,
                       check=True, capture_output=True)
        deadline = time.monotonic() + 60
        phase = ""
        while time.monotonic() < deadline and phase != "Ready":
            phase = subprocess.run([str(kubectl), "get", "lt", "orders", "-o", "jsonpath={.status.phase}"],
                                   text=True, env=run, capture_output=True).stdout
            time.sleep(0.5)
        assert phase == "Ready", said
        assert (tmp_path / "lake" / "orders" / ".weir").is_dir()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            rest = proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert proc.returncode == 0 and rest.strip().endswith("stopped"), rest
